// Live validation of the job form: after each change the form is checked by the
// server (POST .../jobs/validate/, the same rules as submit; nothing is written)
// and each error is shown next to its field. No framework and no CDN.
(function () {
  "use strict";
  var form = document.getElementById("job-form");
  if (!form) { return; }
  var url = form.dataset.validateUrl;
  var summary = document.getElementById("job-summary");
  var timer = null;
  var sequence = 0;
  var touched = {};

  function liveList(name) {
    var box = document.getElementById("field-" + name);
    if (!box) { return null; }
    var list = box.querySelector("ul.live-errors");
    if (!list) {
      list = document.createElement("ul");
      list.className = "errorlist live-errors";
      box.appendChild(list);
    }
    return list;
  }

  function show(result) {
    Array.prototype.forEach.call(form.querySelectorAll("ul.live-errors"), function (list) {
      list.textContent = "";
    });
    var hidden = 0;
    Object.keys(result.errors).forEach(function (name) {
      var list = liveList(name);
      // Only fields the user has touched get their errors shown while typing.
      if (!list || !touched[name]) { hidden += 1; return; }
      result.errors[name].forEach(function (message) {
        var item = document.createElement("li");
        item.textContent = message;
        list.appendChild(item);
      });
    });
    form.dataset.valid = result.valid ? "true" : "false";
    if (result.valid) {
      summary.textContent = "Looks good: " + result.total_gpus + " " + result.gpu_resource +
        " in total; the team can be admitted at most " + result.max_gpus + ".";
    } else {
      summary.textContent = hidden ? "Some fields still need a value." : "";
    }
    form.dataset.checked = String(sequence);
  }

  function check() {
    var mine = ++sequence;
    var body = new FormData(form);
    fetch(url, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken"), "Accept": "application/json" },
    })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (result) { if (result && mine === sequence) { show(result); } })
      .catch(function () { /* the submit still validates on the server */ });
  }

  function changed(event) {
    if (event.target && event.target.name) { touched[event.target.name] = true; }
    window.clearTimeout(timer);
    timer = window.setTimeout(check, 300);
  }

  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
})();
