// Plan page: draw the server's bathtub figure, poll an unfinished plan (its progress and its
// status badge: queued, then running), confirm activation.
(function () {
  "use strict";
  var figure = document.getElementById("bathtub-figure");
  var chart = document.getElementById("bathtub-chart");
  if (figure && chart && window.Plotly) {
    var fig = JSON.parse(figure.textContent);
    window.Plotly.newPlot(chart, fig.data, fig.layout, { displayModeBar: false, responsive: true });
  }

  var progress = document.getElementById("plan-progress");
  if (progress) {
    var bar = progress.querySelector("progress");
    var label = progress.querySelector("span");
    var note = progress.querySelector("small");
    var badge = document.getElementById("plan-status");
    var poll = function () {
      fetch(progress.dataset.api, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (plan) {
          bar.value = plan.progress;
          label.textContent = plan.progress + "%";
          note.textContent = plan.message || "";
          if (badge && badge.dataset.status !== plan.status) {
            badge.dataset.status = plan.status;
            badge.textContent = plan.status;
          }
          if (plan.status === "done" || plan.status === "failed") {
            window.location.reload();
          } else {
            window.setTimeout(poll, 1000);
          }
        })
        .catch(function () { window.setTimeout(poll, 3000); });
    };
    window.setTimeout(poll, 500);
  }

  var open = document.getElementById("activate");
  var dialog = document.getElementById("activate-dialog");
  if (open && dialog) {
    open.addEventListener("click", function () { dialog.showModal(); });
    document.getElementById("activate-cancel").addEventListener("click", function () { dialog.close(); });
  }
})();
