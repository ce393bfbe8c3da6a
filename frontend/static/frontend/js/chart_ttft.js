import { COLORS, draw, fitTargets, lineTraces, ys } from "./series.js";

// TTFT P50/P90/P99 per window, the axis fitted to the data; the SLA's P90 target is a line over
// a shaded breach zone, P99 a line; a target far above the data is named in the corner instead.
export function render(el, points, ctx) {
  const fit = fitTargets(points, ["ttft_p50", "ttft_p90", "ttft_p99"], [
    { value: ctx.sla.ttft_p90, name: "SLA P90", dash: "dash", band: true },
    { value: ctx.sla.ttft_p99, name: "SLA P99", dash: "dot" },
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
