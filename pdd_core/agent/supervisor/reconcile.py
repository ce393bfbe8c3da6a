"""One site's reconciler: the agents it runs brought to the pools its desired state names.

The decision is a pure function (``decide``): the desired pools of a site (``agent.desired``)
and its members (the agents of the site in the plane's file, with their rollout state and
pool) give what to do next, and the reconciler (``SiteReconciler``, a thread of ``pdd up``'s
supervisor per site) enacts it and decides again, every ``TICK_S``. Its rules:

- An agent serves one pool. Agents the topology started serve no pool yet; the first desired
  state adopts each into a pool of its role that lacks instances (no churn when the plan keeps
  a role's count). A pool lacking instances gets new agents (new ids, registered like the rest).
- An agent of a pool the site no longer wants, or beyond its pool's count (the newest first),
  is drained: no new request is routed to it, what it holds finishes (bounded by the desired
  state's ``drain_timeout_s``), then it is stopped. An agent changes role only this way: it is
  drained and stopped, and its pool's replacement is a new agent of the new role.
- Make before break: a role's surplus is drained only once no agent of that role in the site is
  still starting, so a rollout never leaves a role with fewer agents ready than it had, or than
  the plan asks, while it runs.
- No pools (no active plan, or an active plan the desired state says is not enacted: an
  aggregated design these agents cannot run) means "keep what you run": nothing is started or
  drained.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

log = logging.getLogger(__name__)
TICK_S = 0.5  # how often the reconciler decides again (a drain's progress, a new agent ready)
POLL_S = 2.0  # how often it asks for the desired state (the contract's ~2 s)
MAX_INSTANCES_HERE = 8  # per pool on one machine: agents beyond it are not started (logged)


class Pool(Protocol):
    """What the decision reads of a desired pool (``agent.desired.DesiredPool``)."""

    @property
    def key(self) -> str: ...

    @property
    def role(self) -> str: ...

    @property
    def instances(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Member:
    """One agent of the site as the reconciler sees it (from the plane's file)."""

    id: str
    role: str
    pool: str
    state: str  # config.AGENT_STATES


@dataclass(frozen=True, slots=True)
class Actions:
    """What to do next: adopt agents into pools (id -> pool key), start agents (pool key,
    role), drain agents (ids); empty when the site runs what it should."""

    adopt: Mapping[str, str] = field(default_factory=dict)
    start: tuple[tuple[str, str], ...] = ()
    drain: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.adopt or self.start or self.drain)


def _newest_first(ids: Iterable[str]) -> list[str]:
    """Agent ids, the most recently made first (ids end in a number that only grows)."""

    def number(agent_id: str) -> tuple[int, str]:
        tail = agent_id.rsplit("-", 1)[-1]
        return (int(tail) if tail.isdigit() else -1, agent_id)

    return sorted(ids, key=number, reverse=True)


def decide(
    pools: Sequence[Pool], members: Sequence[Member], *, cap: int = MAX_INSTANCES_HERE
) -> Actions:
    """The next actions that bring ``members`` to ``pools`` (module docstring: the rules).

    ``cap`` bounds the agents of one pool on this machine (a plan sized for a cluster). Stopped
    and draining members count for nothing: a draining agent is on its way out."""
    if not pools:
        return Actions()
    live = [m for m in members if m.state in ("starting", "serving")]
    wanted = {p.key: min(p.instances, cap) for p in pools}
    role_of = {p.key: str(p.role) for p in pools}
    serving: dict[str, list[str]] = {key: [] for key in wanted}
    adopt: dict[str, str] = {}
    drain: list[str] = []
    for member in live:
        if member.pool in wanted:
            serving[member.pool].append(member.id)
    for member in live:
        if member.pool in wanted:
            continue
        # Unclaimed (or of a pool the site no longer wants): adopted by a pool of its role
        # that lacks instances, else surplus.
        lacking = [k for k in sorted(wanted) if role_of[k] == member.role
                   and len(serving[k]) < wanted[k]]  # fmt: skip
        if lacking and not member.pool:
            adopt[member.id] = lacking[0]
            serving[lacking[0]].append(member.id)
        else:
            drain.append(member.id)
    start: list[tuple[str, str]] = []
    for key in sorted(wanted):
        ids = serving[key]
        start += [(key, role_of[key])] * max(0, wanted[key] - len(ids))
        drain += _newest_first(ids)[: max(0, len(ids) - wanted[key])]
    starting_roles = {m.role for m in live if m.state == "starting"} | {r for _, r in start}
    by_id = {m.id: m for m in members}
    drain = [d for d in drain if by_id[d].role not in starting_roles]
    return Actions(adopt=adopt, start=tuple(start), drain=tuple(drain))


class Plane(Protocol):
    """What the reconciler drives (``supervisor.DataPlane``)."""

    def members(self, site: str) -> list[Member]: ...

    def adopt(self, agent_id: str, pool: str) -> None: ...

    def add_agent(self, role: str, site: str, pool: str) -> str: ...

    def drain(self, agent_id: str) -> None: ...

    def retire(self, agent_id: str) -> None: ...

    def mark_serving(self, agent_id: str) -> None: ...

    def is_ready(self, agent_id: str) -> bool: ...

    def gateway_health(self) -> Mapping[str, Any]: ...


DesiredSource = Callable[[], Any]  # () -> DesiredState (``agent.desired``) or None


class SiteReconciler:
    """The thread that keeps one site on its desired state (``decide``), fetched from
    ``source`` every ``POLL_S`` (and at once on start). A source that fails keeps the last
    desired state in force (said once); an error of one step is said and the loop goes on, so
    the thread that started the site's agents (their ``PR_SET_PDEATHSIG`` parent) lives as long
    as the plane."""

    def __init__(
        self, plane: Plane, site: str, source: DesiredSource, say: Callable[[str], None]
    ) -> None:
        self.plane, self.site, self.source, self.say = plane, site, source, say
        self.desired: Any = None
        self.draining: dict[str, float] = {}  # agent id -> when its drain must end
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"reconcile-{site}", daemon=True)
        self._failing = False

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)

    def _fetch(self) -> None:
        try:
            desired = self.source()
        except Exception as exc:
            if not self._failing:
                self.say(f"pdd up: {self.site}: desired state unavailable ({exc}); keeping it")
            self._failing = True
            return
        if self._failing:
            self.say(f"pdd up: {self.site}: desired state available again")
        self._failing = False
        if desired is not None and (self.desired is None or desired != self.desired):
            pools = ", ".join(f"{p.key} x{p.instances}" for p in desired.pools)
            if not desired.enacted:
                pools = f"not enacted ({desired.reason}); keeping what runs"
            self.say(f"pdd up: {self.site}: desired state version {desired.version}: {pools}")
        if desired is not None:
            self.desired = desired

    def _run(self) -> None:
        fetched = 0.0
        while not self.stopping.is_set():
            if time.monotonic() - fetched >= POLL_S:
                self._fetch()
                fetched = time.monotonic()
            try:
                self.step()
            except Exception as exc:
                self.say(f"pdd up: {self.site}: reconcile step failed: {exc!r}")
            self.stopping.wait(TICK_S)

    def step(self) -> None:
        """One round: promote ready agents, finish drains, then decide and act."""
        health = self.plane.gateway_health()
        up = health.get("agents", {})
        in_flight = health.get("in_flight", {})
        states = health.get("states", {})
        members = self.plane.members(self.site)
        for member in members:
            if member.state == "starting" and self.plane.is_ready(member.id):
                self.plane.mark_serving(member.id)
                self.say(f"pdd up: {member.id} serving ({member.pool})")
            if member.state == "draining":
                ends = self.draining.setdefault(member.id, time.monotonic() + self._timeout())
                # Held nothing and the gateway has seen the drain (no new request since), or
                # past the drain timeout (what it still holds resumes elsewhere).
                idle = states.get(member.id) == "draining" and in_flight.get(member.id) == 0
                if idle or time.monotonic() >= ends or not up.get(member.id, True):
                    why = "drained" if idle else "drain timeout or gone"
                    self.plane.retire(member.id)
                    self.draining.pop(member.id, None)
                    self.say(f"pdd up: {member.id} stopped ({why})")
        if self.desired is None:
            return
        # A serving agent the gateway does not reach yet counts as starting: no drain of its
        # role until it takes requests (make before break).
        view = [replace(m, state="starting") if m.state == "serving" and not up.get(m.id) else m
                for m in self.plane.members(self.site)]  # fmt: skip
        actions = decide(self.desired.pools, view)
        for agent_id, pool in actions.adopt.items():
            self.plane.adopt(agent_id, pool)
            self.say(f"pdd up: {agent_id} adopted into {pool}")
        for pool, role in actions.start:
            agent_id = self.plane.add_agent(role, self.site, pool)
            self.say(f"pdd up: {agent_id} starting ({pool})")
        for agent_id in actions.drain:
            self.plane.drain(agent_id)
            self.draining[agent_id] = time.monotonic() + self._timeout()
            self.say(f"pdd up: {agent_id} draining")

    def _timeout(self) -> float:
        return float(getattr(self.desired, "drain_timeout_s", 30.0))


def file_source(path: str, site: str) -> DesiredSource:
    """The desired state of ``site`` from a JSON file, read anew at every poll (``pdd up
    --desired FILE``: a plane without a control plane, tests): one site's document as the
    control plane answers it, or a list of them. A site the file does not name keeps what it
    runs."""
    from pathlib import Path

    from pdd_core.agent.desired import DesiredState

    def read() -> Any:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        for document in raw if isinstance(raw, list) else [raw]:
            if isinstance(document, dict) and document.get("site") == site:
                return DesiredState.from_dict(document)
        return None

    return read


def control_plane_source(url: str, token: str, site: str) -> DesiredSource:
    """The desired state of ``site`` from the control plane (``GET /api/v1/sites/{slug}/
    desired/``) with that site's agent token."""
    import asyncio
    from urllib.parse import quote

    from pdd_core.agent.control import ControlPlaneClient
    from pdd_core.agent.desired import DesiredState

    client = ControlPlaneClient(url, token)
    path = f"/api/v1/sites/{quote(site)}/desired/"

    def read() -> Any:
        return DesiredState.from_dict(asyncio.run(client.request("GET", path)))

    return read
