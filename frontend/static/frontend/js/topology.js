// The topology page: live WAN utilisation per link from the site streams.
import { openLive } from "./live.js";
import { kpiPoint, mergePoints } from "./series.js";

const sites = JSON.parse(document.getElementById("topology-sites").textContent);
const pushed = {};

// Three significant digits: a quiet line carries Mbit/s, a busy one Gbit/s.
function gbpsText(gbps) {
  return gbps === 0 ? "0" : gbps >= 100 ? gbps.toFixed(0) : gbps.toPrecision(3);
}

function update(site, gbps) {
  for (const row of document.querySelectorAll(`tr[data-kind="wan"][data-source="${site}"]`)) {
    const capacity = Number(row.dataset.capacity);
    const cell = row.querySelector(".js-gbps");
    cell.dataset.gbps = String(gbps);
    cell.textContent = gbpsText(gbps);
    row.querySelector(".js-util").textContent = capacity ? (100 * gbps / capacity).toFixed(1) + "%" : "–";
  }
}

for (const row of document.querySelectorAll('tr[data-kind="wan"]')) {
  update(row.dataset.source, Number(row.querySelector(".js-gbps").dataset.gbps) || 0);
}
openLive({
  scopes: sites.map((s) => "site:" + s),
  statusEl: document.getElementById("live-status"),
  // Per site, the pushed 5 s windows; a link shows the one that just closed (the filling
  // window's bytes are partial), as the overview's tiles do.
  onPoints: (message) => {
    const fresh = message.points.filter((p) => p.window === "5s");
    if (!fresh.length) return;
    pushed[message.key] = mergePoints(pushed[message.key] || [], fresh);
    update(message.key, kpiPoint(pushed[message.key]).wan_gbps);
  },
});
