// The overview page: figures from server JSON first, then live points and the deployment's state
// from /ws/live/ (frontend/overview_pages.py says what the page shows).
import { openLive } from "./live.js";
import { kpiPoint, mergePoints, view } from "./series.js";
import * as kpis from "./kpis.js";
import * as sla from "./sla.js";
import * as ttft from "./chart_ttft.js";
import * as hitBands from "./chart_hit_bands.js";
import * as bcr from "./chart_bcr.js";
import * as wan from "./chart_wan.js";
import * as rld from "./chart_rld.js";
import * as pipelines from "./chart_pipelines.js";

const ctx = JSON.parse(document.getElementById("overview-data").textContent);
const liveScope = ctx.scope === "all" ? "all" : `${ctx.scope}:${ctx.key}`;
let points = ctx.series;
const openAlerts = new Map((ctx.state.open_alerts || []).map((a) => [a.id, a]));
const charts = [
  [ttft, "chart-ttft"], [hitBands, "chart-hit-bands"], [bcr, "chart-bcr"],
  [wan, "chart-wan"], [rld, "chart-rld"], [pipelines, "chart-pipelines"],
];
const kpiRoot = document.getElementById("kpis");
view.windowMs = ctx.window_s * 1000;

// The x axis: the chosen range up to now (live), or the asked-for past range.
function xRange() {
  if (ctx.x_range) return ctx.x_range;
  const now = Date.now();
  return [new Date(now - ctx.range_s * 1000).toISOString(), new Date(now + view.windowMs).toISOString()];
}

function trim(list) {
  if (ctx.x_range) return list;
  const since = Date.now() - ctx.range_s * 1000 - view.windowMs;
  return list.filter((p) => Date.parse(p.start) >= since);
}

function renderAll() {
  view.xRange = xRange();
  for (const [chart, id] of charts) chart.render(document.getElementById(id), points, ctx);
  kpis.render(kpiRoot, kpiPoint(points), ctx);
  document.body.dataset.points = String(points.length);
}

function renderState(state) {
  ctx.plan_bcr = state.plan ? state.plan.bcr : null;
  kpis.renderState(kpiRoot, { ...state, open_alerts: [...openAlerts.values()] });
  sla.render(document.getElementById("sla-table"), state.sla);
}

async function resume() {
  const window = ctx.window === "1m" ? "1m" : "5s";
  const response = await fetch(`/api/v1/telemetry/summary/?window=${window}&scope=${encodeURIComponent(liveScope)}&points=${Math.min(ctx.max_points, 720)}`,
    { credentials: "same-origin" });
  if (response.ok) { points = trim(mergePoints(points, (await response.json()).series, ctx.max_points)); renderAll(); }
}

const params = new URLSearchParams(location.search);
if (ctx.x_range && params.get("mark_from")) {
  view.marks = [{ x0: params.get("mark_from"), x1: params.get("mark_to") || new Date().toISOString(), label: "alert open" }];
}
renderAll();
renderState(ctx.state);
document.getElementById("scope-picker").addEventListener("change", (e) => e.target.form.submit());
const reachesNow = !ctx.x_range || Date.parse(ctx.x_range[1]) > Date.now() - 60000;
if (reachesNow) {
  openLive({
    scopes: [liveScope],
    state: liveScope,
    statusEl: document.getElementById("live-status"),
    onPoints: (message) => {
      const fresh = message.points.filter((p) => p.window === ctx.window);
      if (!fresh.length) return;
      points = trim(mergePoints(points, fresh, ctx.max_points));
      renderAll();
      document.body.dataset.liveUpdates = String(Number(document.body.dataset.liveUpdates || 0) + 1);
    },
    // Immediate where the evaluator shares this page's channel layer; the state confirms it.
    onAlert: (alert) => {
      if (alert.state === "open") openAlerts.set(alert.id, alert); else openAlerts.delete(alert.id);
      kpis.renderState(kpiRoot, { open_alerts: [...openAlerts.values()] });
    },
    onState: (state) => {
      openAlerts.clear();
      for (const a of state.open_alerts) openAlerts.set(a.id, a);
      renderState(state);
      document.body.dataset.stateUpdates = String(Number(document.body.dataset.stateUpdates || 0) + 1);
    },
    onResume: resume,
  });
} else {
  const badge = document.getElementById("live-status");
  badge.dataset.state = "history";
  badge.textContent = "past range";
}
