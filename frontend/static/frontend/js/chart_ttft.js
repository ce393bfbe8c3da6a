import { COLORS, draw, fitTargets, lineTraces, ys } from "./series.js";

// TTFT P50/P90/P99 per window; the SLA's P90 target is a line over the shaded breach zone above
// it, P99 a line; the axis always reaches past both targets.
export function render(el, points, ctx) {
  const fit = fitTargets(points, ["ttft_p50", "ttft_p90", "ttft_p99"], [
    { value: ctx.sla.ttft_p90, name: "SLA P90", dash: "dash", band: true, always: true },
    { value: ctx.sla.ttft_p99, name: "SLA P99", dash: "dot", always: true },
  ], "s");
  draw(el, [
    ...lineTraces(points, ys(points, "ttft_p50"), { name: "P50", line: { color: COLORS[0] } }),
    ...lineTraces(points, ys(points, "ttft_p90"), { name: "P90", line: { color: COLORS[1] } }),
    ...lineTraces(points, ys(points, "ttft_p99"), { name: "P99", line: { color: COLORS[2] } }),
  ], {
    yaxis: { title: { text: "s" }, range: fit.range },
    shapes: fit.shapes, annotations: fit.annotations,
  }, points);
}
