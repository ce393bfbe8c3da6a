"""A site's reconciler decides from its desired pools and its members
(``agent.supervisor.reconcile``).

The decision is pure: each test gives the desired pools and the agents of a site and checks
what the reconciler does next; the property test plays the decision against a simulated site
(started agents become ready a step later, drained ones stop) and checks that it converges to
the plan's counts per pool without ever leaving a role with fewer ready agents than both the
old and the new design have. ``SiteReconciler.step`` is driven against a site held in memory
(what ``pdd up``'s supervisor and its gateway would do and say).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.agent.config import ProcessRole
from pdd_core.agent.desired import DesiredPool, DesiredState, not_enacted_reason
from pdd_core.agent.supervisor.reconcile import Actions, Member, SiteReconciler, decide, file_source

P4 = DesiredPool(role=ProcessRole.PREFILL, chip="h800", instances=2, tp=4, pp=4)
RLD = DesiredPool(role=ProcessRole.RELAY, chip="h800", instances=1, tp=4, pp=4)


def topology(*roles: str) -> list[Member]:
    """Agents a topology started: serving, in no pool yet."""
    counts: Counter[str] = Counter()
    members = []
    for role in roles:
        members.append(Member(f"{role}-{counts[role]}", role, "", "serving"))
        counts[role] += 1
    return members


def test_no_pools_keeps_what_the_site_runs() -> None:
    assert decide([], topology("prefill", "relay")) == Actions()


def test_the_topologys_agents_are_adopted_when_the_plan_keeps_their_counts() -> None:
    actions = decide([P4, RLD], topology("prefill", "prefill", "relay"))

    assert actions == Actions(adopt={"prefill-0": P4.key, "prefill-1": P4.key, "relay-0": RLD.key})


def test_a_pool_short_of_instances_starts_new_ones() -> None:
    members = [Member("p-0", "prefill", P4.key, "serving")]

    assert decide([replace(P4, instances=3)], members).start == ((P4.key, "prefill"),) * 2


def test_surplus_is_drained_newest_first() -> None:
    members = [Member(f"p-{n}", "prefill", P4.key, "serving") for n in (0, 1, 2, 10)]

    assert decide([P4], members).drain == ("p-10", "p-2")


def test_a_role_the_plan_drops_is_drained() -> None:
    members = [Member("p-0", "prefill", P4.key, "serving"), Member("rld-0", "relay", "", "serving")]

    assert decide([P4], members).drain == ("rld-0",)


def test_a_new_shape_starts_before_the_old_one_drains() -> None:
    tp8 = DesiredPool(role=ProcessRole.PREFILL, chip="h800", instances=2, tp=8)
    old = [Member(f"p-{n}", "prefill", P4.key, "serving") for n in (0, 1)]

    first = decide([tp8], old)
    assert first == Actions(start=((tp8.key, "prefill"),) * 2)  # nothing drained yet
    starting = [*old, Member("p-2", "prefill", tp8.key, "starting"),
                Member("p-3", "prefill", tp8.key, "starting")]  # fmt: skip
    assert decide([tp8], starting) == Actions()
    ready = [replace(m, state="serving") for m in starting]
    assert decide([tp8], ready) == Actions(drain=("p-0", "p-1"))


def test_draining_and_stopped_agents_count_for_nothing() -> None:
    members = [Member("p-0", "prefill", P4.key, "draining"), Member("p-1", "prefill", P4.key,
               "stopped"), Member("p-2", "prefill", P4.key, "serving")]  # fmt: skip

    assert decide([P4], members) == Actions(start=((P4.key, "prefill"),))


def test_a_pool_runs_at_most_cap_agents_on_one_machine() -> None:
    assert len(decide([replace(P4, instances=100)], [], cap=8).start) == 8


POOLS = [
    DesiredPool(role=ProcessRole.PREFILL, chip="h800", instances=0, tp=4, pp=4),
    DesiredPool(role=ProcessRole.PREFILL, chip="h800", instances=0, tp=8),
    DesiredPool(role=ProcessRole.RELAY, chip="h800", instances=0, tp=4, pp=4),
]


def _ready(members: list[Member], role: str) -> int:
    return sum(m.role == role and m.state == "serving" for m in members)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    old=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    new=st.lists(st.integers(0, 3), min_size=3, max_size=3),
)
def test_a_rollout_converges_and_never_leaves_a_role_short(old: list[int], new: list[int]) -> None:
    before = [replace(p, instances=n) for p, n in zip(POOLS, old, strict=True)]
    after = [replace(p, instances=n) for p, n in zip(POOLS, new, strict=True)]
    members = [Member(f"{p.role}-{p.key[-4:]}-{i}", str(p.role), p.key, "serving")
               for p in before for i in range(p.instances)]  # fmt: skip
    floor = {role: min(sum(p.instances for p in before if p.role == role),
                       sum(p.instances for p in after if p.role == role))
             for role in ("prefill", "relay")}  # fmt: skip
    made = 0
    for _ in range(10):
        # A step: agents started last step are ready, drained ones stopped, then decide.
        members = [replace(m, state="serving") if m.state == "starting" else m for m in members]
        members = [replace(m, state="stopped") if m.state == "draining" else m for m in members]
        actions = decide(after, members)
        members = [replace(m, pool=actions.adopt.get(m.id, m.pool)) for m in members]
        members = [replace(m, state="draining") if m.id in actions.drain else m for m in members]
        for key, role in actions.start:
            members.append(Member(f"new-{made}", role, key, "starting"))
            made += 1
        for role, least in floor.items():
            assert _ready(members, role) >= least, (role, members)
        if not actions:
            break
    live = Counter(m.pool for m in members if m.state == "serving")
    assert live == Counter({p.key: p.instances for p in after if p.instances})


class SitePlane:
    """A site held in memory, for ``SiteReconciler.step``: what the supervisor would do to its
    file and children, and what its gateway's ``/health`` would say."""

    def __init__(self, members: list[Member]) -> None:
        self.by_id = {m.id: m for m in members}
        self.ready: set[str] = set()
        self.health: dict[str, dict[str, Any]] = {"agents": {}, "states": {}, "in_flight": {}}
        self.made = 0

    def members(self, site: str) -> list[Member]:
        return list(self.by_id.values())

    def _set(self, agent_id: str, **changes: str) -> None:
        self.by_id[agent_id] = replace(self.by_id[agent_id], **changes)

    def adopt(self, agent_id: str, pool: str) -> None:
        self._set(agent_id, pool=pool)

    def add_agent(self, role: str, site: str, pool: str) -> str:
        agent_id = f"new-{self.made}"
        self.made += 1
        self.by_id[agent_id] = Member(agent_id, role, pool, "starting")
        return agent_id

    def drain(self, agent_id: str) -> None:
        self._set(agent_id, state="draining")

    def retire(self, agent_id: str) -> None:
        self._set(agent_id, state="stopped")

    def mark_serving(self, agent_id: str) -> None:
        self._set(agent_id, state="serving")

    def is_ready(self, agent_id: str) -> bool:
        return agent_id in self.ready

    def gateway_health(self) -> Mapping[str, Any]:
        return self.health

    def reached(self, agent_id: str, *, state: str, holding: int = 0) -> None:
        """The gateway reaches ``agent_id``, knows it ``state`` and what it holds."""
        self.health["agents"][agent_id] = True
        self.health["states"][agent_id] = state
        self.health["in_flight"][agent_id] = holding


def desired(*pools: DesiredPool, drain_timeout_s: float = 30.0) -> DesiredState:
    return DesiredState("dc-a", 1, 1, drain_timeout_s, tuple(pools))


def test_a_new_agent_serves_once_ready_and_only_then_does_the_old_one_drain() -> None:
    tp8 = DesiredPool(role=ProcessRole.PREFILL, chip="h800", instances=1, tp=8)
    site = SitePlane([Member("p-0", "prefill", P4.key, "serving")])
    site.reached("p-0", state="serving")
    reconciler = SiteReconciler(site, "dc-a", lambda: None, lambda line: None)
    reconciler.desired = desired(tp8)

    reconciler.step()
    assert site.by_id["new-0"].state == "starting"
    assert site.by_id["p-0"].state == "serving"
    site.ready.add("new-0")
    reconciler.step()  # ready: serving, but the gateway does not reach it yet
    assert (site.by_id["new-0"].state, site.by_id["p-0"].state) == ("serving", "serving")
    site.reached("new-0", state="serving")
    reconciler.step()
    assert site.by_id["p-0"].state == "draining"


def test_a_drained_agent_stops_when_it_holds_nothing_or_at_the_drain_timeout() -> None:
    site = SitePlane([Member("p-0", "prefill", P4.key, "serving"),
                      Member("p-1", "prefill", P4.key, "serving")])  # fmt: skip
    for agent in ("p-0", "p-1"):
        site.reached(agent, state="serving")
    reconciler = SiteReconciler(site, "dc-a", lambda: None, lambda line: None)
    reconciler.desired = desired(replace(P4, instances=0), drain_timeout_s=0.2)

    reconciler.step()
    assert {m.state for m in site.members("dc-a")} == {"draining"}
    site.reached("p-0", state="draining", holding=0)
    site.reached("p-1", state="draining", holding=2)
    reconciler.step()
    assert (site.by_id["p-0"].state, site.by_id["p-1"].state) == ("stopped", "draining")
    time.sleep(0.25)  # past the drain timeout: what p-1 holds resumes elsewhere
    reconciler.step()
    assert site.by_id["p-1"].state == "stopped"


def test_a_failing_source_keeps_the_last_desired_state(tmp_path: Path) -> None:
    path = tmp_path / "desired.json"
    path.write_text(json.dumps([desired(P4).to_dict(), {**desired(RLD).to_dict(), "site": "b"}]))
    said: list[str] = []
    reconciler = SiteReconciler(SitePlane([]), "dc-a", file_source(str(path), "dc-a"), said.append)

    reconciler._fetch()
    path.write_text("{")
    reconciler._fetch()
    reconciler._fetch()

    assert reconciler.desired == desired(P4)
    assert len([line for line in said if "unavailable" in line]) == 1  # said once


def test_a_desired_file_holds_one_site_or_a_list_and_a_site_it_omits_keeps_its_agents(
    tmp_path: Path,
) -> None:
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    one.write_text(json.dumps(desired(P4).to_dict()))
    many.write_text(json.dumps([{**desired(RLD).to_dict(), "site": "dc-b"}]))

    assert file_source(str(one), "dc-a")() == desired(P4)
    assert file_source(str(many), "dc-a")() is None
    assert file_source(str(many), "dc-b")().pools == (RLD,)


def test_a_plan_not_enacted_keeps_every_agent_as_it_runs(tmp_path: Path) -> None:
    # The lead's demo: an aggregated plan is active; the site runs a P (adopted into its pool)
    # and an RLD (in no pool yet). Nothing starts, drains or changes pool.
    kept = DesiredState("dc-a", 2, 9, 30.0, enacted=False,
                        reason=str(not_enacted_reason("colocated")))  # fmt: skip
    path = tmp_path / "desired.json"
    path.write_text(json.dumps(kept.to_dict()))
    running = [Member("p-0", "prefill", P4.key, "serving"), *topology("prefill", "relay")[1:]]
    site = SitePlane(running)
    for member in running:
        site.reached(member.id, state="serving")
    said: list[str] = []
    reconciler = SiteReconciler(site, "dc-a", file_source(str(path), "dc-a"), said.append)

    reconciler._fetch()
    reconciler.step()

    assert reconciler.desired == kept
    assert site.members("dc-a") == running and site.made == 0
    assert said == [f"pdd up: dc-a: desired state version 2: not enacted ({kept.reason}); "
                    "keeping what runs"]  # fmt: skip
