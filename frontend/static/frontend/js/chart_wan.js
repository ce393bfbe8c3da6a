import { draw, xs, ys } from "./series.js";

// WAN Gbps per window against the total WAN link capacity.
export function render(el, points, ctx) {
  const x = xs(points);
  draw(el, [
    { x, y: ys(points, "wan_gbps"), name: "WAN Gbps", mode: "lines", fill: "tozeroy" },
    { x: [x[0], x[x.length - 1]], y: [ctx.wan_capacity_gbps, ctx.wan_capacity_gbps],
      name: "capacity", mode: "lines", line: { dash: "dash", color: "#b3261e" } },
  ], { yaxis: { title: { text: "Gbps" }, rangemode: "tozero" } });
}
