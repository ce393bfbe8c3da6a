"""Reads of a site's desired state: the active plan's pools in that site, with operators'
overrides applied, as ``pdd_core.agent.desired.DesiredState`` (the document the site's
reconciler polls at ``GET /api/v1/sites/{slug}/desired/``), and running against desired per pool.

Only the active plan's version counts: an override lapses when another plan is activated, and no
active plan gives no pools ("keep what you run"). Nor does an active plan whose design family this
plane's agents cannot run (``pdd_core.agent.desired.not_enacted_reason``: an aggregated one): its
desired state says it is not enacted and why, and each site keeps (and shows) what it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import QuerySet

from controlplane.agents.models import Agent, AgentState, PoolOverride
from controlplane.inventory.models import Site
from controlplane.planning.models import Plan
from controlplane.planning.selectors import active_plan, plan_engine
from pdd_core.agent.desired import (
    POOL_ROLES,
    PROCESS_ROLE_OF,
    DesiredPool,
    DesiredState,
    PoolSource,
    not_enacted_reason,
)
from pdd_core.specs import Role


def overrides_in_force(site: Site, version: int) -> QuerySet[PoolOverride]:
    """The overrides that apply to ``site`` under config ``version`` (not cleared)."""
    return PoolOverride.objects.filter(site=site, version=version, cleared_at__isnull=True)


def _not_enacted(plan: Plan) -> str | None:
    result = plan.result if isinstance(plan.result, dict) else {}
    return not_enacted_reason(result.get("policy", "pdd"))


def active_plan_not_enacted() -> str | None:
    """Why the active plan is not enacted on this plane (``not_enacted_reason``), or None: no
    active plan, or one its sites run."""
    plan = active_plan()
    return None if plan is None or plan.version is None else _not_enacted(plan)


def site_desired(site: Site) -> DesiredState:
    """What ``site`` must run now: each pool of the active plan placed in it (its count from an
    override where one is in force), with the plan's engine settings for it; none, with the
    reason, for a plan this plane cannot enact."""
    timeout = float(settings.AGENT_DRAIN_TIMEOUT_S)
    plan = active_plan()
    if plan is None or not isinstance(plan.result, dict) or plan.version is None:
        return DesiredState(site=site.slug, version=0, plan=None, drain_timeout_s=timeout)
    reason = _not_enacted(plan)
    if reason is not None:
        return DesiredState(site=site.slug, version=plan.version, plan=plan.pk,
                            drain_timeout_s=timeout, enacted=False, reason=reason)  # fmt: skip
    overrides = dict(overrides_in_force(site, plan.version).values_list("pool", "instances"))
    pools = []
    for raw in plan.result.get("pools") or ():
        if raw.get("site") != site.slug:
            continue
        pool = DesiredPool(
            role=PROCESS_ROLE_OF[Role(raw["role"])],
            chip=str(raw["chip"]),
            instances=int(raw["instances"]),
            tp=int(raw["tp"]),
            pp=int(raw.get("pp", 1)),
            dp=int(raw.get("dp", 1)),
            ep=int(raw.get("ep", 1)),
            engine=plan_engine(plan, raw),
        )
        if pool.key in overrides:
            pool = replace(pool, instances=overrides[pool.key], source=PoolSource.OVERRIDE)
        pools.append(pool)
    return DesiredState(
        site=site.slug,
        version=plan.version,
        plan=plan.pk,
        drain_timeout_s=timeout,
        pools=tuple(pools),
    )


# An agent that reports no rollout state (an older agent) shows as this; it counts as running.
UNKNOWN_STATE = "unknown"
# The source of a pool a site keeps because the active plan is not enacted (its running agents').
KEPT = "kept"


@dataclass(frozen=True)
class PoolRollout:
    """One pool of one site: desired instances against the healthy agents that run it.

    An agent belongs to the pool whose key it reports; one that reports none (an older agent)
    to the site's desired pool of its role, when there is exactly one. ``states`` counts the
    pool's healthy agents by reported state (``unknown`` for those that report none);
    ``running`` counts those serving, and the unknown ones (they serve as they always did).
    Under a plan that is not enacted a site's rows are the pools its healthy agents run
    (``source`` "kept", ``desired`` what runs); an agent that reports no pool counts for a row of
    its role alone (``key`` "<role>", no chip or shape).
    """

    site: str
    key: str
    role: str
    chip: str
    shape: str
    desired: int
    source: str
    states: dict[str, int]

    @property
    def running(self) -> int:
        return self.states.get(AgentState.SERVING.value, 0) + self.states.get(UNKNOWN_STATE, 0)

    @property
    def converged(self) -> bool:
        return self.running == self.desired and set(self.states) <= {
            AgentState.SERVING.value, UNKNOWN_STATE,
        }  # fmt: skip


def _pool_of(agent: Agent, keys: list[str]) -> str | None:
    if agent.pool:
        return str(agent.pool)
    same_role = [k for k in keys if k.split("/", 1)[0] == agent.role]
    return same_role[0] if len(same_role) == 1 else None


def pool_rollouts(sites: list[Site], agents: list[Agent]) -> list[PoolRollout]:
    """Desired against running for every pool of ``sites`` under the active plan: the desired
    state's pools, then any pool healthy agents still report that it no longer has (desired 0,
    e.g. the old shape while a rollout drains it); under a plan that is not enacted, the pools the
    site's agents run (kept). Empty without an active plan."""
    rows = []
    for site in sites:
        desired = site_desired(site)
        if not desired.version:
            continue
        keys = [p.key for p in desired.pools]
        states: dict[str, dict[str, int]] = {}
        for agent in agents:
            if agent.site_id != site.pk or agent.role not in POOL_ROLES:
                continue
            if agent.status != "healthy":
                continue
            key = _pool_of(agent, keys) if desired.enacted else str(agent.pool or agent.role)
            if key is not None:
                counts = states.setdefault(key, {})
                state = agent.state or UNKNOWN_STATE
                counts[state] = counts.get(state, 0) + 1
        extra = sorted(k for k in states if k not in keys)
        if not desired.enacted:
            for key in extra:
                kept = _row(site.slug, key, 0, KEPT, states)
                rows.append(replace(kept, desired=kept.running))
            continue
        for pool in desired.pools:
            rows.append(_row(site.slug, pool.key, pool.instances, pool.source.value, states))
        rows.extend(_row(site.slug, k, 0, PoolSource.PLAN.value, states) for k in extra)
    return rows


def _row(
    site: str, key: str, desired: int, source: str, states: dict[str, dict[str, int]]
) -> PoolRollout:
    role, chip, shape = [*key.split("/"), "", ""][:3]
    return PoolRollout(site=site, key=key, role=role, chip=chip, shape=shape, desired=desired,
                       source=source, states=dict(sorted(states.get(key, {}).items())))  # fmt: skip
