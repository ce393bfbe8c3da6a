// The KPI tiles from the latest point.
const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1) + "%");

export function render(root, point, ctx) {
  if (!point) return;
  const set = (name, text) => { const el = root.querySelector(`[data-kpi="${name}"]`); if (el) el.textContent = text; };
  set("rps", fmt(point.rps, 1));
  set("ttft", `${fmt(point.ttft_p50)} / ${fmt(point.ttft_p90)} / ${fmt(point.ttft_p99)}`);
  set("hit", `${pct(point.hit_request_weighted)} / ${pct(point.hit_token_weighted)}`);
  set("bcr", fmt(point.bcr, 4));
  const cap = ctx.wan_capacity_gbps;
  set("wan", cap ? `${pct(point.wan_gbps / cap)} of ${cap} Gbps` : `${fmt(point.wan_gbps)} Gbps`);
  root.dataset.lastStart = point.start;
}

export function setAlerts(root, count) {
  const el = root.querySelector('[data-kpi="alerts"] a');
  if (el) el.textContent = String(count);
}
