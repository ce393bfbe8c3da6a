import { COLORS, draw, xs } from "./series.js";

// Requests per pipeline per window, stacked; each pipeline keeps its colour.
const PIPELINES = ["P-MD", "P-RLD-MD", "P-RLD"];
const PIPELINE_COLORS = [COLORS[0], COLORS[3], COLORS[1]];

export function render(el, points) {
  const x = xs(points);
  draw(el, PIPELINES.map((name, i) => ({
    x, y: points.map((p) => p.pipelines[name] || 0), name, stackgroup: "mix", mode: "lines",
    line: { color: PIPELINE_COLORS[i] },
  })), { yaxis: { title: { text: "requests" }, rangemode: "nonnegative" } }, points);
}
