import { COLORS, draw, lineTraces, xs, ys } from "./series.js";

// BCR (goodput per $/h of hardware) per window, and the active plan's prediction if any.
export function render(el, points, ctx) {
  const x = xs(points);
  const traces = lineTraces(points, ys(points, "bcr"), { name: "BCR", line: { color: COLORS[0] } });
  if (ctx.plan_bcr !== null && ctx.plan_bcr !== undefined) {
    traces.push({ x: [x[0], x[x.length - 1]], y: [ctx.plan_bcr, ctx.plan_bcr],
      name: "plan prediction", mode: "lines", line: { dash: "dash", color: COLORS[4] } });
  }
  draw(el, traces, { yaxis: { title: { text: "req/s per $/h" }, rangemode: "tozero" } }, points);
}
