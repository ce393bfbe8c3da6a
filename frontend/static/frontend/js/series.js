// Points keyed by window start: a pushed point replaces the one with the same start or is
// appended; the series keeps the last MAX_POINTS windows.
const MAX_POINTS = 240;
// The overview's windows are 5 s long; one whose end is still ahead is filling: its figures are
// partial (fewer requests so far), so it is drawn dotted on a grey band, not as a real dip.
export const WINDOW_MS = 5000;
export const COLORS = ["#2f5bd3", "#e07b00", "#1e7b3a", "#8e44ad", "#6b7385", "#c0392b", "#16a2b8"];
const SLA_COLOR = "#b3261e";

export function mergePoints(points, incoming) {
  const byStart = new Map(points.map((p) => [p.start, p]));
  for (const p of incoming) byStart.set(p.start, p);
  return [...byStart.values()].sort((a, b) => (a.start < b.start ? -1 : 1)).slice(-MAX_POINTS);
}

export const xs = (points) => points.map((p) => p.start);
export const ys = (points, key) => points.map((p) => p[key]);

// The point the KPI tiles show: the newest closed window when it is the one just before the
// filling window (a filling window's rates are partial and would read as a dip), else the newest.
export function kpiPoint(points, now = Date.now()) {
  const cut = fillingFrom(points, now);
  if (cut === 0 || cut === points.length) return points[points.length - 1];
  const gap = Date.parse(points[cut].start) - Date.parse(points[cut - 1].start);
  return gap <= WINDOW_MS ? points[cut - 1] : points[points.length - 1];
}

// Index of the first still-filling point (points.length when every window has closed).
export function fillingFrom(points, now = Date.now()) {
  let i = points.length;
  while (i > 0 && Date.parse(points[i - 1].start) + WINDOW_MS > now) i -= 1;
  return i;
}

// x and y with a null between two points more than one window apart: windows without requests
// have no point, and the line breaks there instead of drawing a slope across the silence.
export function withGaps(x, y) {
  const gx = [];
  const gy = [];
  for (let i = 0; i < x.length; i += 1) {
    if (i > 0 && Date.parse(x[i]) - Date.parse(x[i - 1]) > WINDOW_MS * 1.5) {
      gx.push(new Date(Date.parse(x[i - 1]) + WINDOW_MS).toISOString());
      gy.push(null);
    }
    gx.push(x[i]);
    gy.push(y[i]);
  }
  return [gx, gy];
}

// A line over closed windows, continued dotted (same colour, no legend entry) into the filling one.
// Each window is also a small dot: a window with silence on both sides has no line to draw.
export function lineTraces(points, y, trace) {
  const x = xs(points);
  const cut = fillingFrom(points);
  const base = { mode: "lines+markers", marker: { size: 4 }, legendgroup: trace.name, ...trace };
  const [cx, cy] = withGaps(x.slice(0, cut), y.slice(0, cut));
  const closed = { ...base, x: cx, y: cy };
  if (cut === points.length) return [closed];
  const from = Math.max(cut - 1, 0);
  return [closed, {
    ...base, x: x.slice(from), y: y.slice(from), mode: "lines+markers", showlegend: false,
    line: { ...(trace.line || {}), dash: "dot" }, marker: { symbol: "circle-open", size: 7 },
    hovertemplate: "%{y} (window still filling)<extra>" + trace.name + "</extra>",
  }];
}

// The grey band over the filling window(s), labelled.
function fillingLayout(points) {
  const cut = fillingFrom(points);
  if (!points.length || cut === points.length) return { shapes: [], annotations: [] };
  const x0 = points[cut].start;
  const x1 = new Date(Date.parse(points[points.length - 1].start) + WINDOW_MS).toISOString();
  return {
    shapes: [{ type: "rect", xref: "x", yref: "paper", x0, x1, y0: 0, y1: 1, layer: "below",
      fillcolor: "#e8eaee", opacity: 0.7, line: { width: 0 } }],
    annotations: [{ xref: "x", yref: "paper", x: x0, y: 1, xanchor: "left", yanchor: "top",
      text: "filling", showarrow: false, font: { size: 10, color: "#6b7385" } }],
  };
}

// A y range fitted to the data, with target lines (SLA, capacity) that lie within reach drawn
// across the chart and the others named in a corner instead of squashing the data under them.
// targets: [{ value, name, dash, band }]; band shades the area above the line (breach zone).
export function fitTargets(points, keys, targets, unit) {
  let top = 0;
  for (const p of points) for (const k of keys) if (Number.isFinite(p[k])) top = Math.max(top, p[k]);
  let yMax = top > 0 ? top * 1.25 : 1;
  const shown = targets.filter((t) => Number.isFinite(t.value) && t.value <= yMax * 2.5);
  for (const t of shown) yMax = Math.max(yMax, t.value * 1.15);
  const hidden = targets.filter((t) => Number.isFinite(t.value) && !shown.includes(t));
  const shapes = [];
  for (const t of shown) {
    shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: t.value, y1: t.value,
      line: { color: SLA_COLOR, dash: t.dash || "dash", width: 1.5 } });
    if (t.band) {
      shapes.push({ type: "rect", xref: "paper", x0: 0, x1: 1, y0: t.value, y1: yMax,
        fillcolor: SLA_COLOR, opacity: 0.06, line: { width: 0 }, layer: "below" });
    }
  }
  const annotations = shown.map((t) => ({ xref: "paper", x: 1, y: t.value, xanchor: "right",
    yanchor: "bottom", showarrow: false, text: `${t.name} ${fmt(t.value)} ${unit}`,
    font: { size: 10, color: SLA_COLOR } }));
  if (hidden.length) {
    annotations.push({ xref: "paper", yref: "paper", x: 0, y: 1, xanchor: "left", yanchor: "bottom",
      showarrow: false, font: { size: 10, color: SLA_COLOR },
      text: "above the chart: " + hidden.map((t) => `${t.name} ${fmt(t.value)} ${unit}`).join(" · ") });
  }
  return { range: [0, yMax], shapes, annotations };
}

function fmt(value) {
  return value >= 10 ? value.toFixed(0) : value >= 1 ? value.toFixed(1) : value.toPrecision(2);
}

export const LAYOUT = {
  margin: { l: 50, r: 20, t: 22, b: 40 },
  legend: { orientation: "h", y: -0.2 },
  xaxis: { type: "date" },
};
export const CONFIG = { displayModeBar: false, responsive: true };

// layout.shapes / layout.annotations are kept; the filling band is added when points are given.
export function draw(el, traces, layout = {}, points = null) {
  const filling = points ? fillingLayout(points) : { shapes: [], annotations: [] };
  const merged = {
    ...LAYOUT, ...layout,
    shapes: [...(layout.shapes || []), ...filling.shapes],
    annotations: [...(layout.annotations || []), ...filling.annotations],
  };
  window.Plotly.react(el, traces, merged, CONFIG);
}
