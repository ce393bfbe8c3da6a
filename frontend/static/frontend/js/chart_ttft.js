import { draw, xs, ys } from "./series.js";

// TTFT P50/P90/P99 per window against the SLA's P90 and P99 targets.
export function render(el, points, ctx) {
  const x = xs(points);
  const line = (y, name, dash) => ({ x: [x[0], x[x.length - 1]], y: [y, y], name, mode: "lines",
    line: { dash, color: "#b3261e" } });
  draw(el, [
    { x, y: ys(points, "ttft_p50"), name: "P50", mode: "lines" },
    { x, y: ys(points, "ttft_p90"), name: "P90", mode: "lines" },
    { x, y: ys(points, "ttft_p99"), name: "P99", mode: "lines" },
    line(ctx.sla.ttft_p90, "SLA P90", "dot"),
    line(ctx.sla.ttft_p99, "SLA P99", "dash"),
  ], { yaxis: { title: { text: "s" }, rangemode: "tozero" } });
}
