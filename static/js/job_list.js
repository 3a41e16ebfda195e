// The job list refreshes itself: it polls the rows URL (JSON) and redraws the table.
// No framework and no CDN; text is set with textContent (never parsed as HTML).
(function () {
  "use strict";
  var table = document.getElementById("job-table");
  if (!table) { return; }
  var rowsUrl = table.dataset.rowsUrl;
  var detailUrl = table.dataset.detailUrl;  // ".../teams/TEAM/jobs/0/"
  var interval = parseInt(table.dataset.interval || "5000", 10);
  var showTeam = table.querySelector("thead th:nth-child(2)").textContent === "Team";
  var stamp = document.getElementById("jobs-refreshed");

  function cell(row, className, text) {
    var td = document.createElement("td");
    td.className = className;
    if (text !== undefined) { td.textContent = text; }
    row.appendChild(td);
    return td;
  }

  // Seconds in words, as the server's `duration` filter writes them (queues.whatif.format_duration).
  function duration(seconds) {
    if (seconds === null || seconds === undefined) { return "-"; }
    if (seconds < 90) { return Math.round(seconds) + " s"; }
    if (seconds < 90 * 60) { return Math.round(seconds / 60) + " min"; }
    return (seconds / 3600).toFixed(1) + " h";
  }

  function draw(jobs) {
    var body = table.tBodies[0];
    var fresh = document.createElement("tbody");
    jobs.forEach(function (job) {
      var tr = document.createElement("tr");
      tr.dataset.job = job.id;
      tr.dataset.phase = job.phase;
      var name = cell(tr, "name");
      var link = document.createElement("a");
      link.href = detailUrl.replace("/TEAM/", "/" + job.team + "/").replace("/jobs/0/", "/jobs/" + job.id + "/");
      link.textContent = job.name;
      name.appendChild(link);
      if (showTeam) { cell(tr, "team", job.team); }
      var phase = cell(tr, "phase");
      var badge = document.createElement("span");
      badge.className = "badge phase-" + job.phase.toLowerCase();
      badge.textContent = job.phase;
      phase.appendChild(badge);
      if (job.cancel_requested && ["Succeeded", "Failed", "Cancelled"].indexOf(job.phase) < 0) {
        var note = document.createElement("span");
        note.className = "muted";
        note.textContent = " cancelling";
        phase.appendChild(note);
      }
      var reason = cell(tr, "reason");
      var strong = document.createElement("strong");
      strong.textContent = job.reason;
      var message = document.createElement("span");
      message.className = "message";
      message.textContent = " " + job.message;
      reason.appendChild(strong);
      reason.appendChild(message);
      cell(tr, "position", job.queue_rank === null ? "—" : String(job.queue_rank));
      cell(tr, "waited", duration(job.wait_seconds));
      cell(tr, "gpus", job.workers + " × " + job.gpus_per_worker + " " + job.flavor);
      var pre = cell(tr, "preemptions", String(job.preemptions));
      if (job.preemption_loop) {
        var loop = document.createElement("span");
        loop.className = "badge bad";
        loop.textContent = "preemption loop";
        pre.appendChild(document.createTextNode(" "));
        pre.appendChild(loop);
      }
      cell(tr, "submitter", job.submitter || "—");
      fresh.appendChild(tr);
    });
    if (!jobs.length) {
      var empty = document.createElement("tr");
      empty.className = "empty";
      var td = cell(empty, "muted", table.dataset.emptyText || "No jobs yet.");
      td.colSpan = 9;
      fresh.appendChild(empty);
    }
    table.replaceChild(fresh, body);
    table.dataset.refreshed = String(Date.now());
    if (stamp) { stamp.textContent = "updated " + new Date().toLocaleTimeString(); }
  }

  function poll() {
    fetch(rowsUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { return; }
        draw(data.jobs);
        var total = document.getElementById("job-total");
        if (total) { total.textContent = String(data.total); }
      })
      .catch(function () { /* keep the last rows; try again next time */ })
      .then(function () { window.setTimeout(poll, interval); });
  }

  window.setTimeout(poll, interval);
})();
