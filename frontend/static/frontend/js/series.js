// Points keyed by window start: a pushed point replaces the one with the same start or is
// appended; the series keeps the last MAX_POINTS windows.
const MAX_POINTS = 240;

export function mergePoints(points, incoming) {
  const byStart = new Map(points.map((p) => [p.start, p]));
  for (const p of incoming) byStart.set(p.start, p);
  return [...byStart.values()].sort((a, b) => (a.start < b.start ? -1 : 1)).slice(-MAX_POINTS);
}

export const xs = (points) => points.map((p) => p.start);
export const ys = (points, key) => points.map((p) => p[key]);

export const LAYOUT = {
  margin: { l: 50, r: 20, t: 10, b: 40 },
  legend: { orientation: "h", y: -0.2 },
  xaxis: { type: "date" },
};
export const CONFIG = { displayModeBar: false, responsive: true };

export function draw(el, traces, layout = {}) {
  window.Plotly.react(el, traces, { ...LAYOUT, ...layout }, CONFIG);
}
