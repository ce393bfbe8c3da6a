// BCR and cost as the pages show them (frontend/units.py says why): telemetry and the planner
// report BCR in req/s per $/h; pages show good requests per $ (x 3600 s/h).
export const SECONDS_PER_HOUR = 3600;

export const bcrPerDollar = (bcr) => (Number.isFinite(bcr) ? bcr * SECONDS_PER_HOUR : null);

// Three significant digits, whole numbers from 100 up (as units.bcr_text).
export function bcrText(bcr) {
  const v = bcrPerDollar(bcr);
  if (v === null) return "–";
  return v >= 100 ? Math.round(v).toLocaleString("en-US") : Number(v.toPrecision(3)).toString();
}

// Hardware $ per million output tokens of a window (null without output).
export function costPerMtok(point) {
  if (!point || !Number.isFinite(point.cost_per_hour) || !(point.tokens_per_s > 0)) return null;
  return point.cost_per_hour / (point.tokens_per_s * SECONDS_PER_HOUR) * 1e6;
}

export function money(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return "$" + (v >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(2));
}

// Seconds for people: "850 ms", "3.2 s", "4 min 05 s", "2 h 10 min".
export function duration(seconds) {
  if (!Number.isFinite(seconds)) return "–";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} min ${String(Math.round(seconds % 60)).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}
