// The overview page: figures from server JSON first, then live points from /ws/live/.
import { openLive } from "./live.js";
import { kpiPoint, mergePoints } from "./series.js";
import * as kpis from "./kpis.js";
import * as ttft from "./chart_ttft.js";
import * as hitBands from "./chart_hit_bands.js";
import * as bcr from "./chart_bcr.js";
import * as wan from "./chart_wan.js";
import * as rld from "./chart_rld.js";
import * as pipelines from "./chart_pipelines.js";

const ctx = JSON.parse(document.getElementById("overview-data").textContent);
let points = ctx.series;
let openAlerts = ctx.open_alerts;
const charts = [
  [ttft, "chart-ttft"], [hitBands, "chart-hit-bands"], [bcr, "chart-bcr"],
  [wan, "chart-wan"], [rld, "chart-rld"], [pipelines, "chart-pipelines"],
];
const kpiRoot = document.getElementById("kpis");

function renderAll() {
  for (const [chart, id] of charts) chart.render(document.getElementById(id), points, ctx);
  kpis.render(kpiRoot, kpiPoint(points), ctx);
  document.body.dataset.points = String(points.length);
}

async function resume() {
  const response = await fetch("/api/v1/telemetry/summary/?window=5s&scope=all&points=120",
    { credentials: "same-origin" });
  if (response.ok) { points = mergePoints(points, (await response.json()).series); renderAll(); }
}

renderAll();
openLive({
  scopes: ["all"],
  statusEl: document.getElementById("live-status"),
  onPoints: (message) => {
    const fresh = message.points.filter((p) => p.window === "5s");
    if (!fresh.length) return;
    points = mergePoints(points, fresh);
    renderAll();
    document.body.dataset.liveUpdates = String(Number(document.body.dataset.liveUpdates || 0) + 1);
  },
  onAlert: (alert) => {
    openAlerts += alert.state === "open" ? 1 : -1;
    kpis.setAlerts(kpiRoot, Math.max(openAlerts, 0));
  },
  onResume: resume,
});
