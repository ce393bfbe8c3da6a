// The SLA panel from the state's `sla` (controlplane/telemetry/attainment.py): one row per
// target, its figure over the last minute and the last hour, coloured by attainment.
import { duration } from "./units.js";

const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1) + "%");
const WORDS = { green: "met", amber: "met, budget low", red: "missed", none: "no requests" };

function cell(fig, target) {
  const td = document.createElement("td");
  td.className = `num state-${fig.state}`;
  td.dataset.state = fig.state;
  if (fig.state === "none") { td.textContent = "no requests"; return td; }
  const value = document.createElement("b");
  value.textContent = duration(fig.value);
  const within = document.createElement("small");
  within.textContent = `${pct(fig.attainment)} within`;
  td.append(value, within);
  td.title = `${WORDS[fig.state]}: ${pct(fig.attainment)} of ${fig.requests} requests within ` +
    `${duration(target)}` + (fig.rejected ? ` (${fig.rejected} rejected, counted as misses)` : "");
  return td;
}

export function render(table, sla) {
  if (!table || !sla) return;
  const body = table.tBodies[0];
  const rows = sla.targets.map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.target = t.key;
    const th = document.createElement("th");
    th.innerHTML = `${t.label} <span class="unit">≤ ${duration(t.target_s)}</span>`;
    tr.append(th, cell(sla.minute.targets[t.key], t.target_s), cell(sla.hour.targets[t.key], t.target_s));
    return tr;
  });
  const all = document.createElement("tr");
  all.dataset.target = "all";
  const share = (w) => {
    const td = document.createElement("td");
    td.className = "num";
    if (!w.requests) { td.textContent = "no requests"; return td; }
    const figure = document.createElement("b");
    figure.textContent = pct(w.sla_met_share);
    const of = document.createElement("small");
    of.textContent = `of ${w.requests.toLocaleString("en-US")} requests`;
    td.append(figure, of);
    return td;
  };
  const th = document.createElement("th");
  th.innerHTML = 'Every target <span class="unit">requests that met the SLA</span>';
  all.append(th, share(sla.minute), share(sla.hour));
  body.replaceChildren(...rows, all);
}
