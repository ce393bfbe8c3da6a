import { COLORS, draw, fitTargets, lineTraces, ys } from "./series.js";

// WAN Gbit/s per window against the links' total capacity (a line always in sight).
export function render(el, points, ctx) {
  const fit = fitTargets(points, ["wan_gbps"], [
    { value: ctx.wan_capacity_gbps, name: "capacity", dash: "dash" },
  ], "Gbit/s");
  draw(el, lineTraces(points, ys(points, "wan_gbps"),
    { name: "WAN Gbit/s", fill: "tozeroy", line: { color: COLORS[0] } }), {
    yaxis: { title: { text: "Gbit/s" }, range: fit.range },
    shapes: fit.shapes, annotations: fit.annotations,
  }, points);
}
