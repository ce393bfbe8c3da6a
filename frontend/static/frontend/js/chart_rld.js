import { COLORS, countStep, draw, xs, ys } from "./series.js";

// RLD's share of decoded tokens (line, right axis) and handoff modes per window (bars, whole
// numbers on the left axis).
export function render(el, points) {
  const x = xs(points);
  const mode = (name) => points.map((p) => p.handoffs[name] || 0);
  const oneShot = mode("one-shot");
  const extend = mode("extend-decode");
  const top = Math.max(0, ...oneShot.map((v, i) => v + extend[i]));
  draw(el, [
    { x, y: oneShot, name: "one-shot", type: "bar", marker: { color: COLORS[1] } },
    { x, y: extend, name: "extend-decode", type: "bar", marker: { color: COLORS[3] } },
    { x, y: ys(points, "rld_token_share"), name: "RLD token share", mode: "lines", yaxis: "y2",
      line: { color: COLORS[2] } },
  ], {
    barmode: "stack",
    yaxis: { title: { text: "handoffs" }, range: [0, Math.max(top, 1) * 1.15], dtick: countStep(top),
      tickformat: "d" },
    // Its own ticks (not the handoff axis's grid) and room for them on the right.
    yaxis2: { overlaying: "y", side: "right", range: [0, 1], tickformat: ".0%",
      tickvals: [0, 0.25, 0.5, 0.75, 1], showgrid: false, title: { text: "RLD token share" } },
    margin: { l: 50, r: 60, t: 22, b: 40 },
  }, points);
}
