// The KPI tiles: traffic figures from the latest closed window, alerts and plan from the state.
import { bcrText, costPerMtok, money } from "./units.js";

const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1) + "%");

function gbps(v) {
  return !Number.isFinite(v) ? "–" : v === 0 ? "0" : v >= 100 ? v.toFixed(0) : v.toPrecision(3);
}

function setter(root) {
  return (name, text) => {
    const el = root.querySelector(`[data-kpi="${name}"]`);
    if (el) el.textContent = text;
  };
}

export function render(root, point, ctx) {
  if (!point) return;
  const set = setter(root);
  set("rps", fmt(point.rps, 1));
  set("goodput", fmt(point.goodput_rps, 2));
  set("sla-met", point.requests ? pct((point.goodput_rps * windowSeconds(point)) / point.requests) : "–");
  set("hit", `${pct(point.hit_request_weighted)} / ${pct(point.hit_token_weighted)}`);
  set("bcr", bcrText(point.bcr));
  set("cost", money(point.cost_per_hour));
  set("cost-mtok", money(costPerMtok(point)));
  const cap = ctx.wan_capacity_gbps;
  set("wan", cap ? pct(point.wan_gbps / cap) : `${gbps(point.wan_gbps)} Gbit/s`);
  if (cap) set("wan-detail", `${gbps(point.wan_gbps)} of ${gbps(cap)} Gbit/s`);
  root.dataset.lastStart = point.start;
}

function windowSeconds(point) {
  return point.window === "1m" ? 60 : 5;
}

// The state's figures: open alerts (the count links to the alerts page), plan and agents.
export function renderState(root, state) {
  const set = setter(root);
  const open = state.open_alerts || [];
  const link = root.querySelector('[data-kpi="alerts"] a');
  if (link) link.textContent = String(open.length);
  const tile = root.querySelector("#kpi-alerts");
  if (tile) tile.dataset.alertsOpen = String(open.length > 0);
  set("alerts-detail", open.length ? open.map((a) => a.name || a.rule).join(", ") : "none open");
  if ("plan" in state) set("plan", state.plan ? `v${state.plan.version}` : "none");
  if (state.agents) set("agents", `${state.agents_healthy} of ${state.agents.length} agents healthy`);
}
