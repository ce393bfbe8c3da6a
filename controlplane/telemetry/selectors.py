"""Reads of telemetry: series and latest points of a scope, cost rates, prices, alerts.

Every figure is derived from rollup rows (``summary.summarize``); nothing here reads request
records, so a read costs a few indexed queries whatever the traffic.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from controlplane.billing.models import PriceBook
from controlplane.inventory.models import InstancePool, Link, LinkKind
from controlplane.inventory.selectors import chip_model_list, instance_pool_list
from controlplane.telemetry import integrations
from controlplane.telemetry.integrations import active_plan
from controlplane.telemetry.models import (
    Alert,
    AlertMetric,
    AlertState,
    RollupScope,
    SlaRule,
    TelemetryRollup,
)
from controlplane.telemetry.rollups import delta_of
from controlplane.telemetry.summary import summarize
from pdd_core import specs
from pdd_core.agent.desired import pool_key
from pdd_core.routing import Pipeline

# Roles whose pools serve a pipeline: the cost behind the ``pool`` scope.
_P, _RLD, _MD = specs.Role.PREFILL, specs.Role.RELAY_DECODE, specs.Role.MAIN_DECODE
PIPELINE_ROLES = {
    Pipeline.P_MD: {_P, _MD},
    Pipeline.P_RLD_MD: {_P, _RLD, _MD},
    Pipeline.P_RLD: {_P, _RLD},
}
_COST_TTL_S = 5.0
_cost_cache: dict[str, Any] = {}


def _plan_pool_cost(
    pool: Mapping[str, Any], chips: Mapping[str, specs.ChipSpec], instances: int
) -> float:
    """``specs.pool_cost_per_hour`` of ``instances`` instances of one of the active plan's pools
    (``PoolChoice.to_dict``); a chip the catalog lacks costs nothing."""
    chip = chips.get(str(pool["chip"]))
    if chip is None:
        return 0.0
    shape = specs.InstanceShape(**{k: int(pool.get(k, 1)) for k in ("tp", "pp", "dp", "ep")})
    return specs.pool_cost_per_hour(chip, shape, instances)


# The agent registry's roles (``ProcessRole``) of the plan's pool roles.
_AGENT_ROLE = {_P: "prefill", _RLD: "relay", _MD: "main"}


def running_instances(pools: tuple[dict[str, Any], ...]) -> list[int]:
    """How many instances of each of the active plan's pools run: its site's healthy agents of
    its role (those reporting a pool key only in that pool; a stopped or starting agent does
    not run). With no agent of any pool's role registered (a control plane that no data plane
    has joined, figures ingested from elsewhere) every pool counts at the plan's size: what
    it was told to run is all there is to price."""
    agents = [a for a in integrations.agents() or [] if a["role"] in _AGENT_ROLE.values()]
    if not agents:
        return [int(p["instances"]) for p in pools]
    counts = []
    for pool in pools:
        role = _AGENT_ROLE[specs.Role(pool["role"])]
        shape = specs.InstanceShape(**{k: int(pool.get(k, 1)) for k in ("tp", "pp", "dp", "ep")})
        key = pool_key(role, str(pool["chip"]), shape)
        counts.append(sum(
            1 for a in agents
            if a["healthy"] and a["site"] == pool["site"] and a["role"] == role
            and a.get("pool", "") in ("", key)
            and a.get("state", "") not in ("starting", "stopped")
        ))  # fmt: skip
    return counts


def _inventory_pool_cost(pool: InstancePool) -> float:
    spec = pool.to_spec()
    return specs.pool_cost_per_hour(pool.chip.to_spec(), spec.shape, spec.instances)


def cost_rates(*, cached: bool = False) -> dict[str, Any]:
    """Hardware cost per hour of the deployment and per site and pipeline (``$/h``).

    From the active plan's pools when ``controlplane.planning`` has one, at the instances that
    run (``running_instances``: a pool half rolled out costs half), else the inventory's
    pools; each priced by ``pdd_core.specs.pool_cost_per_hour`` (whole nodes x chips per node x
    chip price), the rule the planner prices its designs with.
    ``cached`` keeps the answer for 5 s (ingestion calls it for every batch).
    """
    if cached and _cost_cache and time.monotonic() - _cost_cache["at"] < _COST_TTL_S:
        return dict(_cost_cache["rates"])
    plan = active_plan()
    if plan is not None and plan.pools:
        # What the active plan runs, priced from the chip catalog.
        chips = {c.slug: c.to_spec() for c in chip_model_list()}
        running = running_instances(plan.pools)
        pools = [
            (str(p["site"]), str(p["role"]), _plan_pool_cost(p, chips, n))
            for p, n in zip(plan.pools, running, strict=True)
        ]
    else:
        pools = [(p.site.slug, p.role, _inventory_pool_cost(p)) for p in instance_pool_list()]
    rates: dict[str, Any] = {
        "all": sum(c for _, _, c in pools),
        "site": {},
        "pool": {
            pipe: sum(c for _, role, c in pools if role in roles)
            for pipe, roles in PIPELINE_ROLES.items()
        },
    }
    for site, _, cost in pools:
        rates["site"][site] = rates["site"].get(site, 0.0) + cost
    _cost_cache.update(at=time.monotonic(), rates=rates)
    return rates


def cost_for(rates: Mapping[str, Any], scope: str, key: str) -> float | None:
    """The cost rate behind a scope: its site's or pipeline's pools; the deployment's for
    all, tenants and models (they share every pool)."""
    if scope in (RollupScope.SITE, RollupScope.POOL):
        return float(rates[scope].get(key, 0.0))
    return float(rates["all"])


def prices_by_model(models: set[str], when: datetime) -> dict[str, specs.PriceBook]:
    """The price book in force at ``when`` for each model (the earliest currency by code when
    a model is priced in several; revenue rates are indicative, invoices are exact)."""
    books = (
        PriceBook.objects.filter(model__slug__in=models, effective_from__lte=when)
        .exclude(effective_to__lte=when)
        .select_related("model")
        .order_by("currency")
    )
    found: dict[str, specs.PriceBook] = {}
    for b in books:
        found.setdefault(
            b.model.slug,
            specs.PriceBook(
                miss_input_per_mtok=float(b.miss_input_per_mtok or Decimal(0)),
                hit_input_per_mtok=float(b.hit_input_per_mtok or Decimal(0)),
                output_per_mtok=float(b.output_per_mtok or Decimal(0)),
                currency=b.currency,
            ),
        )
    return found


def point_of(row: TelemetryRollup, rates: Mapping[str, Any]) -> dict[str, Any]:
    return summarize(
        delta_of(row),
        window_s=row.window_s,
        start=row.start,
        scope=row.scope,
        key=row.key,
        cost_per_hour=cost_for(rates, row.scope, row.key),
    )


def series(
    *,
    window_s: int,
    scope: str,
    key: str = "",
    points: int = 120,
    end: datetime | None = None,
) -> list[dict[str, Any]]:
    """The last ``points`` windows that have data, oldest first (one indexed query); with
    ``end``, those that started before it (a past time range, e.g. an alert's)."""
    until = end or timezone.now()
    since = until - timedelta(seconds=window_s * points)
    rows = TelemetryRollup.objects.filter(window_s=window_s, scope=scope, key=key, start__gte=since)
    if end is not None:
        rows = rows.filter(start__lt=end)
    rates = cost_rates()
    return [point_of(r, rates) for r in reversed(list(rows.order_by("-start")[:points]))]


def latest_closed(points: list[dict[str, Any]], window_s: int) -> dict[str, Any] | None:
    """The point a "now" figure shows (as the overview's KPI tiles, ``series.js`` kpiPoint):
    the newest closed window when it is the one just before the still-filling window (whose
    rates are partial and would read as a dip), else the newest point (None: no points)."""
    if not points:
        return None
    now = timezone.now()
    window = timedelta(seconds=window_s)
    starts = [datetime.fromisoformat(p["start"].replace("Z", "+00:00")) for p in points]
    cut = next((i for i, start in enumerate(starts) if start + window > now), len(points))
    if 0 < cut < len(points) and starts[cut] - starts[cut - 1] <= window:
        return points[cut - 1]
    return points[-1]


def scope_keys(scope: str, window_s: int = 60) -> list[str]:
    """The keys of a scope that have retained rollups (for the dashboard's scope picker)."""
    return list(
        TelemetryRollup.objects.filter(window_s=window_s, scope=scope)
        .values_list("key", flat=True)
        .distinct()
        .order_by("key")
    )


def wan_capacity_gbps() -> float:
    return float(
        sum(Link.objects.filter(kind=LinkKind.WAN).values_list("bandwidth_gbps", flat=True))
    )


def sla_lines() -> dict[str, float]:
    """Thresholds of the enabled deployment-wide rules per metric, for the charts' SLA lines:
    a rule replaces the ``pdd_core.specs.SLA`` default of its metric (the strictest rule wins
    where several watch one metric); the default stands where no rule says otherwise."""
    default = specs.SLA()
    lines = {"ttft_p90": default.ttft_p90_s, "ttft_p99": default.ttft_p99_s,
             "tpot_p90": default.tpot_p90_s, "tpot_p99": default.tpot_p99_s}  # fmt: skip
    ruled: dict[str, float] = {}
    for metric, threshold in SlaRule.objects.filter(enabled=True, model="", tenant="").values_list(
        "metric", "threshold"
    ):
        if metric != AlertMetric.GOODPUT:
            ruled[metric] = min(threshold, ruled.get(metric, threshold))
    return lines | ruled


def gateway_sla() -> dict[str, float]:
    """The per-request targets pushed to gateways (``agents.config``), from ``sla_lines``, so a
    request is billed as within the SLA by the thresholds the charts draw and the alerts
    judge: ``SLA`` field names in seconds. A P99 target a rule set below its P90 one can never
    bind, and ``pdd_core.specs.SLA`` refuses it, so it is raised to the P90 target."""
    lines = sla_lines()
    ttft = lines["ttft_p90"], max(lines["ttft_p99"], lines["ttft_p90"])
    tpot = lines["tpot_p90"], max(lines["tpot_p99"], lines["tpot_p90"])
    return {"ttft_p90_s": ttft[0], "ttft_p99_s": ttft[1], "tpot_p90_s": tpot[0],
            "tpot_p99_s": tpot[1]}  # fmt: skip


def alert_list(*, state: str | None = None) -> QuerySet[Alert]:
    qs = Alert.objects.select_related("rule")
    return qs.filter(state=state) if state else qs


def open_alert_count() -> int:
    return Alert.objects.filter(state=AlertState.OPEN).count()


def sla_rule_list() -> QuerySet[SlaRule]:
    return SlaRule.objects.all()


def plan_context() -> dict[str, Any]:
    """The active plan's version and predicted BCR for the overview (None without planning)."""
    plan = active_plan()
    if plan is None:
        return {"plan_version": None, "plan_bcr": None}
    return {"plan_version": plan.version, "plan_bcr": plan.predicted_bcr}
