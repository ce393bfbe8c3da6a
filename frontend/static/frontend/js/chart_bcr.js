import { COLORS, draw, lineTraces, xs } from "./series.js";
import { bcrPerDollar } from "./units.js";

// BCR per window in good requests per $ (units.js), and the active plan's prediction if any.
export function render(el, points, ctx) {
  const x = xs(points);
  const y = points.map((p) => bcrPerDollar(p.bcr));
  const traces = lineTraces(points, y, { name: "BCR", line: { color: COLORS[0] },
    hovertemplate: "%{y:.3g} good requests per $<extra></extra>" });
  const plan = bcrPerDollar(ctx.plan_bcr);
  if (plan !== null && x.length) {
    traces.push({ x: [x[0], x[x.length - 1]], y: [plan, plan],
      name: "plan prediction", mode: "lines", line: { dash: "dash", color: COLORS[4] } });
  }
  draw(el, traces, { yaxis: { title: { text: "good requests per $" }, rangemode: "tozero" } }, points);
}
