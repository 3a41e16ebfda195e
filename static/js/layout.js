// A card whose content is wider than the screen scrolls sideways inside itself (never
// the page). Keyboard users must reach such a region too (WCAG 2.1.1): give each one
// that actually scrolls a tab stop and a name (its heading), and drop it again when a
// wider window makes it fit.
(function () {
  "use strict";
  function mark() {
    document.querySelectorAll(".card").forEach(function (card) {
      var scrolls = card.scrollWidth > card.clientWidth + 1;
      if (scrolls && !card.hasAttribute("tabindex")) {
        card.setAttribute("tabindex", "0");
        card.classList.add("scroll-region");
        if (!card.hasAttribute("aria-label") && !card.hasAttribute("role")) {
          var heading = card.querySelector("h2, h3");
          card.setAttribute("role", "region");
          card.setAttribute("aria-label", heading ? heading.textContent.trim() : "Scrollable table");
        }
      } else if (!scrolls && card.classList.contains("scroll-region")) {
        card.removeAttribute("tabindex");
        card.classList.remove("scroll-region");
      }
    });
  }
  window.addEventListener("resize", mark);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mark);
  } else {
    mark();
  }
  window.portalLayout = { mark: mark };
})();
