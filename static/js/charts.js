/*
 * Draws the portal's server-built Plotly figures (portal/charts.py).
 *
 * Every element with a data-figure attribute holds one figure as JSON:
 * {"data": [...], "layout": {...}, "config": {...}}. This script (loaded after
 * our locally served vendor/plotly/plotly.min.js; never a CDN) draws each with
 * Plotly.newPlot, then marks the element data-rendered="true" (or "error" with a
 * message in place of the chart when the JSON or Plotly fails).
 *
 * window.PortalCharts.render(root) draws the figures under root again (for
 * content added after load).
 */
(function () {
  "use strict";

  function fail(el, message) {
    el.setAttribute("data-rendered", "error");
    el.textContent = "Chart could not be drawn: " + message;
    el.classList.add("chart-error");
  }

  function draw(el) {
    if (el.getAttribute("data-rendered") === "true") {
      return Promise.resolve(el);
    }
    if (typeof window.Plotly === "undefined") {
      fail(el, "plotly.js did not load.");
      return Promise.resolve(el);
    }
    var figure;
    try {
      figure = JSON.parse(el.getAttribute("data-figure"));
    } catch (err) {
      fail(el, "invalid figure JSON (" + err.message + ").");
      return Promise.resolve(el);
    }
    var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
    return window.Plotly.newPlot(el, figure.data || [], figure.layout || {}, config).then(
      function () {
        el.setAttribute("data-rendered", "true");
        return el;
      },
      function (err) {
        fail(el, String(err));
        return el;
      }
    );
  }

  function render(root) {
    var nodes = (root || document).querySelectorAll("[data-figure]");
    return Promise.all(Array.prototype.map.call(nodes, draw));
  }

  window.PortalCharts = { render: render, draw: draw };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { render(document); });
  } else {
    render(document);
  }
})();
