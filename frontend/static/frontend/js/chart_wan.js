import { COLORS, draw, fitTargets, lineTraces, ys } from "./series.js";

// WAN Gbit/s per window, the axis fitted to the traffic; the links' total capacity is a line when
// it is within reach, otherwise named in the corner (a lightly used line stays visible).
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
