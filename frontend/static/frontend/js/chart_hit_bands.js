import { draw, xs } from "./series.js";

// Requests per hit band (pdd_core.metrics.HIT_BAND_EDGES) per window, stacked.
const BANDS = ["0-20%", "20-40%", "40-70%", "70-90%", "90-95%", "95-99%", "99-100%"];

export function render(el, points) {
  const x = xs(points);
  draw(el, BANDS.map((name, i) => ({
    x, y: points.map((p) => p.hit_bands[i]), name, type: "bar",
  })), { barmode: "stack", yaxis: { title: { text: "requests" }, rangemode: "nonnegative" } }, points);
}
