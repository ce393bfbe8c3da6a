// The topology page: live WAN utilisation per link from the site streams, and the agents and
// each pool's running count from the deployment's state (both from /ws/live/).
import { openLive } from "./live.js";
import { kpiPoint, mergePoints } from "./series.js";
import { duration } from "./units.js";

const sites = JSON.parse(document.getElementById("topology-sites").textContent);
const POOL_ROLE = { prefill: "P", relay: "RLD", main: "MD" };
const pushed = {};

// Three significant digits: a quiet line carries Mbit/s, a busy one Gbit/s.
function gbpsText(gbps) {
  return gbps === 0 ? "0" : gbps >= 100 ? gbps.toFixed(0) : gbps.toPrecision(3);
}

function update(site, gbps) {
  const selector = `tr[data-kind="wan"][data-source="${site}"], .topo-link[data-source="${site}"]`;
  for (const el of document.querySelectorAll(selector)) {
    const capacity = Number(el.dataset.capacity);
    const cell = el.querySelector(".js-gbps");
    cell.dataset.gbps = String(gbps);
    cell.textContent = gbpsText(gbps);
    const share = capacity ? gbps / capacity : null;
    el.querySelector(".js-util").textContent = share === null ? "–" : (100 * share).toFixed(1) + "%";
    const wire = el.querySelector(".js-wire");
    if (wire && share !== null) wire.style.width = `${Math.min(100, 100 * share)}%`;
  }
}

const ago = (iso, now) => (iso ? duration((now - Date.parse(iso)) / 1000) : "–");
const utc = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "never");

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function renderAgents(state) {
  const body = document.querySelector("#agents tbody");
  if (!state.agents || !state.agents.length) return;
  const now = Date.now();
  body.replaceChildren(...state.agents.map((a) => {
    const tr = document.createElement("tr");
    tr.dataset.agent = a.name;
    tr.dataset.status = a.status;
    const beat = cell(`${ago(a.last_heartbeat_at, now)} ago`);
    beat.title = utc(a.last_heartbeat_at);
    const running = a.status !== "dead" && a.state !== "stopped";
    const up = cell(a.registered_at && running ? ago(a.registered_at, now) : "–", "num");
    up.title = `started ${utc(a.registered_at)}`;
    const restarts = cell(String(a.restarts ?? 0), "num" + (a.restarts ? " error" : ""));
    const refused = a.records_rejected ?? null; // a gateway's heartbeat count; others have none
    // The crash-loop signals first (health, restarts, heartbeat): on a phone the rest scrolls.
    const state = a.state || "unknown";
    // A drained agent the rollout stopped still reports (fresh heartbeats): it is not healthy
    // in the sense an operator reads here, so the column says "stopped" instead.
    const health = state === "stopped" && a.status === "healthy" ? "stopped" : a.status;
    const healthCell = cell(health, `health-${health}`);
    if (health === "stopped") healthCell.title = "stopped by a rollout; its last report is fresh";
    tr.append(cell(a.name), healthCell, restarts,
      cell(refused === null ? "–" : String(refused), "num" + (refused ? " error" : "")), beat,
      cell(a.pool ? `${state} · ${a.pool}` : state, `state-${state}`), up,
      cell(a.config_version === null ? "–" : `v${a.config_version}`, "num"), cell(a.site),
      cell(a.role), cell(a.address || "–"));
    return tr;
  }));
  // Per pool, as the server counts it (agents.desired.pool_rollouts): an agent belongs to the
  // pool it reports, else (an older agent) to its site's pool of its role when there is one;
  // under a plan not enacted, to its role's row of agents that report no pool (no key).
  const pools = [...document.querySelectorAll(".topo-pool")];
  const states = new Map(pools.map((li) => [li, {}]));
  for (const a of state.agents) {
    if (!a.healthy || !POOL_ROLE[a.role]) continue;
    const here = pools.filter((li) => li.dataset.site === a.site);
    const ofRole = here.filter((li) => li.dataset.agentRole === a.role);
    const bare = ofRole.filter((li) => !li.dataset.key);
    const mine = a.pool ? here.filter((li) => li.dataset.key === a.pool) : bare.length ? bare : ofRole;
    if (mine.length !== 1) continue;
    const counts = states.get(mine[0]);
    const s = a.state || "unknown";
    counts[s] = (counts[s] || 0) + 1;
  }
  for (const li of pools) {
    const counts = states.get(li);
    const n = (counts.serving || 0) + (counts.unknown || 0);
    li.dataset.running = String(n);
    li.querySelector(".js-running").textContent = String(n);
    li.classList.toggle("short", li.dataset.desired !== "" && n < Number(li.dataset.desired));
    const box = li.querySelector(".js-states");
    if (box) {
      box.replaceChildren(...Object.keys(counts).sort().map((s) => {
        const span = document.createElement("span");
        span.className = `state state-${s}`;
        span.textContent = `${counts[s]} ${s}`;
        return span;
      }));
    }
  }
  for (const chip of document.querySelectorAll(".agent-chip")) {
    const a = state.agents.find((x) => x.name === chip.dataset.agent);
    if (a) chip.querySelector(".dot").className = "dot " + ({ healthy: "green", stale: "amber" }[a.status] || "red");
  }
}

for (const el of document.querySelectorAll('tr[data-kind="wan"], .topo-link[data-source]')) {
  update(el.dataset.source, Number(el.querySelector(".js-gbps").dataset.gbps) || 0);
}
renderAgents(JSON.parse(document.getElementById("topology-state").textContent));
openLive({
  scopes: sites.map((s) => "site:" + s),
  state: "all",
  statusEl: document.getElementById("live-status"),
  // Per site, the pushed 5 s windows; a link shows the one that just closed (the filling
  // window's bytes are partial), as the overview's tiles do.
  onPoints: (message) => {
    const fresh = message.points.filter((p) => p.window === "5s");
    if (!fresh.length) return;
    pushed[message.key] = mergePoints(pushed[message.key] || [], fresh);
    update(message.key, kpiPoint(pushed[message.key]).wan_gbps);
  },
  onState: (state) => {
    renderAgents(state);
    document.body.dataset.stateUpdates = String(Number(document.body.dataset.stateUpdates || 0) + 1);
  },
});
