import { draw, xs, ys } from "./series.js";

// RLD's share of decoded tokens (line, right axis) and handoff modes per window (bars).
export function render(el, points) {
  const x = xs(points);
  const mode = (name) => points.map((p) => p.handoffs[name] || 0);
  draw(el, [
    { x, y: mode("one-shot"), name: "one-shot", type: "bar" },
    { x, y: mode("extend-decode"), name: "extend-decode", type: "bar" },
    { x, y: ys(points, "rld_token_share"), name: "RLD token share", mode: "lines", yaxis: "y2" },
  ], {
    barmode: "stack",
    yaxis: { title: { text: "handoffs" }, rangemode: "nonnegative" },
    // Its own ticks (not the handoff axis's grid) and room for them on the right.
    yaxis2: { overlaying: "y", side: "right", range: [0, 1], tickformat: ".0%",
      tickvals: [0, 0.25, 0.5, 0.75, 1], showgrid: false, title: { text: "RLD token share" } },
    margin: { l: 50, r: 60, t: 22, b: 40 },
  }, points);
}
