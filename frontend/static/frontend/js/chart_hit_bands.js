import { draw, xs } from "./series.js";

// Requests per hit band (pdd_core.metrics.HIT_BAND_EDGES) per window, stacked from the lowest
// band up, in an ordered scale: pale for cold requests, dark for near-full hits.
const BANDS = ["0-20%", "20-40%", "40-70%", "70-90%", "90-95%", "95-99%", "99-100%"];
const BAND_COLORS = ["#dbe6fb", "#b7cdf6", "#8aaeef", "#5b8de6", "#2f6bd8", "#1f4fae", "#12337a"];

export function render(el, points) {
  const x = xs(points);
  draw(el, BANDS.map((name, i) => ({
    x, y: points.map((p) => p.hit_bands[i]), name, type: "bar", marker: { color: BAND_COLORS[i] },
  })), { barmode: "stack", legend: { orientation: "h", y: -0.2, traceorder: "normal" },
    yaxis: { title: { text: "requests" }, rangemode: "nonnegative" } }, points);
}
