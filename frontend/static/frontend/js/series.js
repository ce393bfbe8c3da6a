// Points keyed by window start: a pushed point replaces the one with the same start or is
// appended; the series keeps the last `max` windows (MAX_POINTS unless the page says).
const MAX_POINTS = 240;
// What the page draws: its windows' length (5 s, or 1 min for ranges beyond 15 min), the x range
// (null: fitted to the data) and shaded marks (an alert's time range). A window whose end is
// still ahead is filling: its figures are partial (fewer requests so far), so it is drawn dotted
// on a grey band, not as a real dip.
export const view = { windowMs: 5000, xRange: null, marks: [] };
export const COLORS = ["#2f5bd3", "#e07b00", "#1e7b3a", "#8e44ad", "#6b7385", "#c0392b", "#16a2b8"];
const SLA_COLOR = "#b3261e";

export function mergePoints(points, incoming, max = MAX_POINTS) {
  const byStart = new Map(points.map((p) => [p.start, p]));
  for (const p of incoming) byStart.set(p.start, p);
  return [...byStart.values()].sort((a, b) => (a.start < b.start ? -1 : 1)).slice(-max);
}

export const xs = (points) => points.map((p) => p.start);
export const ys = (points, key) => points.map((p) => p[key]);

// The point the KPI tiles show: the newest closed window when it is the one just before the
// filling window (a filling window's rates are partial and would read as a dip), else the newest.
export function kpiPoint(points, now = Date.now()) {
  const cut = fillingFrom(points, now);
  if (cut === 0 || cut === points.length) return points[points.length - 1];
  const gap = Date.parse(points[cut].start) - Date.parse(points[cut - 1].start);
  return gap <= view.windowMs ? points[cut - 1] : points[points.length - 1];
}

// Index of the first still-filling point (points.length when every window has closed).
export function fillingFrom(points, now = Date.now()) {
  let i = points.length;
  while (i > 0 && Date.parse(points[i - 1].start) + view.windowMs > now) i -= 1;
  return i;
}

// x and y with a null between two points more than one window apart: windows without requests
// have no point, and the line breaks there instead of drawing a slope across the silence.
export function withGaps(x, y) {
  const gx = [];
  const gy = [];
  for (let i = 0; i < x.length; i += 1) {
    if (i > 0 && Date.parse(x[i]) - Date.parse(x[i - 1]) > view.windowMs * 1.5) {
      gx.push(new Date(Date.parse(x[i - 1]) + view.windowMs).toISOString());
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
  const x1 = new Date(Date.parse(points[points.length - 1].start) + view.windowMs).toISOString();
  return {
    shapes: [{ type: "rect", xref: "x", yref: "paper", x0, x1, y0: 0, y1: 1, layer: "below",
      fillcolor: "#e8eaee", opacity: 0.7, line: { width: 0 } }],
    annotations: [{ xref: "x", yref: "paper", x: x0, y: 1, xanchor: "left", yanchor: "top",
      text: "filling", showarrow: false, font: { size: 10, color: "#6b7385" } }],
  };
}

// A y range that holds the data and its target lines. A target marked `always` (an SLA line) is
// always in sight, so "how far from the SLA" reads at a glance even when the data sits far below
// it; another (a link's capacity) is drawn when within reach of the data, else named in the
// corner instead of squashing the data under it.
// targets: [{ value, name, dash, band, always }]; band shades the area above the line (breach).
export function fitTargets(points, keys, targets, unit) {
  let top = 0;
  for (const p of points) for (const k of keys) if (Number.isFinite(p[k])) top = Math.max(top, p[k]);
  const valid = targets.filter((t) => Number.isFinite(t.value) && t.value > 0);
  let yMax = top > 0 ? top * 1.15 : 0;
  for (const t of valid) if (t.always) yMax = Math.max(yMax, t.value * 1.25);
  if (yMax <= 0) yMax = 1;
  const shown = valid.filter((t) => t.always || t.value <= yMax * 2.5);
  for (const t of shown) yMax = Math.max(yMax, t.value * 1.15);
  const hidden = valid.filter((t) => !shown.includes(t));
  const shapes = [];
  for (const t of shown) {
    if (t.band) {
      shapes.push({ type: "rect", xref: "paper", yref: "y", x0: 0, x1: 1, y0: t.value, y1: yMax,
        fillcolor: SLA_COLOR, opacity: 0.07, line: { width: 0 }, layer: "below" });
    }
    shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: t.value, y1: t.value,
      line: { color: SLA_COLOR, dash: t.dash || "dash", width: 1.5 } });
  }
  const annotations = shown.map((t) => ({ xref: "paper", yref: "y", x: 1, y: t.value,
    xanchor: "right", yanchor: "bottom", showarrow: false, text: `${t.name} ${fmt(t.value)} ${unit}`,
    font: { size: 10, color: SLA_COLOR } }));
  if (hidden.length) {
    annotations.push({ xref: "paper", yref: "paper", x: 0, y: 1, xanchor: "left", yanchor: "bottom",
      showarrow: false, font: { size: 10, color: SLA_COLOR },
      text: "above the chart: " + hidden.map((t) => `${t.name} ${fmt(t.value)} ${unit}`).join(" · ") });
  }
  return { range: [0, yMax], shapes, annotations };
}

// A tick step for counts: whole numbers only, about five ticks.
export function countStep(top) {
  if (!(top > 5)) return 1;
  const raw = top / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
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

// The view's marks (an alert's time range) as shaded bands over the whole height.
function markLayout() {
  return {
    shapes: view.marks.map((m) => ({ type: "rect", xref: "x", yref: "paper", x0: m.x0, x1: m.x1,
      y0: 0, y1: 1, layer: "below", fillcolor: "#f0b35a", opacity: 0.25, line: { width: 0 } })),
    annotations: view.marks.map((m) => ({ xref: "x", yref: "paper", x: m.x0, y: 1, xanchor: "left",
      yanchor: "bottom", text: m.label, showarrow: false, font: { size: 10, color: "#6b4400" } })),
  };
}

// layout.shapes / layout.annotations are kept; the filling band is added when points are given,
// the view's marks and x range always.
export function draw(el, traces, layout = {}, points = null) {
  const filling = points ? fillingLayout(points) : { shapes: [], annotations: [] };
  const marks = markLayout();
  const xaxis = { ...LAYOUT.xaxis, ...(layout.xaxis || {}) };
  if (view.xRange) xaxis.range = view.xRange;
  const merged = {
    ...LAYOUT, ...layout, xaxis,
    shapes: [...marks.shapes, ...(layout.shapes || []), ...filling.shapes],
    annotations: [...(layout.annotations || []), ...filling.annotations, ...marks.annotations],
  };
  window.Plotly.react(el, traces, merged, CONFIG);
}
