import { draw, xs } from "./series.js";

// Requests per pipeline per window, stacked.
const PIPELINES = ["P-MD", "P-RLD-MD", "P-RLD"];

export function render(el, points) {
  const x = xs(points);
  draw(el, PIPELINES.map((name) => ({
    x, y: points.map((p) => p.pipelines[name] || 0), name, stackgroup: "mix", mode: "lines",
  })), { yaxis: { title: { text: "requests" }, rangemode: "nonnegative" } }, points);
}
