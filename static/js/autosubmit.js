/*
 * A <select data-autosubmit> submits its form when changed (no inline handlers:
 * the Content-Security-Policy allows scripts from the portal's static files only).
 */
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el && el.matches && el.matches("select[data-autosubmit]") && el.form) {
      el.form.submit();
    }
  });
})();
