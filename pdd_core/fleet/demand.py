"""A fleet's demands and the planner inputs each is searched with.

A *demand* is one model's traffic from one region (every tenant of that model there). Its
prefill and relay decode run in its own region's sites, next to its users, so TTFT carries no
long haul; main decode may run there too or in any site a WAN line of at most
``nearby_rtt_ms`` joins to one of them (PDD's remote, cheaper decode). The single-model
planner (``pdd_core.planner``) then searches every design family on those sites, exactly as
for a scenario, with each (site, chip)'s limit the share of the inventory this demand was
given (``fleet.plan``'s allocation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pdd_core.fleet.spec import FleetSpec, Tenant
from pdd_core.fleet.traffic import Window, peak_window, window_requests
from pdd_core.planner.inputs import CandidateChip, PlannerInputs
from pdd_core.specs import LinkKind, Role

LOCAL_ROLES: tuple[Role, ...] = (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE)
REMOTE_ROLES: tuple[Role, ...] = (Role.MAIN_DECODE,)


@dataclass(frozen=True, slots=True)
class Demand:
    """One model's traffic from one region."""

    model: str
    region: str
    tenants: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.model}@{self.region}"


def demands(spec: FleetSpec) -> tuple[Demand, ...]:
    """Every (model, region) some tenant sends, in the order of the fleet file's tenants."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for tenant in spec.tenants:
        grouped.setdefault((tenant.model, tenant.region), []).append(tenant.id)
    return tuple(Demand(m, r, tuple(ids)) for (m, r), ids in grouped.items())


def demand_by_id(spec: FleetSpec, demand_id: str) -> Demand:
    for demand in demands(spec):
        if demand.id == demand_id:
            return demand
    raise ValueError(f"demand: no tenant sends {demand_id!r}")


def tenants_of(spec: FleetSpec, demand: Demand) -> tuple[Tenant, ...]:
    return tuple(t for t in spec.tenants if t.id in demand.tenants)


def sites_of(spec: FleetSpec, demand: Demand) -> dict[str, tuple[Role, ...]]:
    """The demand's sites and the roles each may play: its region's sites every role, sites
    a short enough WAN line joins to one of them main decode only."""
    local = spec.sites_in(demand.region)
    sites = dict.fromkeys(local, LOCAL_ROLES)
    for line in spec.wan_lines():
        if line.rtt_ms > spec.settings.nearby_rtt_ms:
            continue
        for near, far in (
            (line.source_site, line.target_site),
            (line.target_site, line.source_site),
        ):
            if near in local and far not in sites:
                sites[far] = REMOTE_ROLES
    return sites


def stocks_of(spec: FleetSpec, demand: Demand) -> list[tuple[str, str]]:
    """The (site, chip) stocks the demand may draw on."""
    sites = sites_of(spec, demand)
    return [(s.site, s.chip) for s in spec.inventory if s.site in sites]


def slice_window(spec: FleetSpec, demand: Demand) -> tuple[Window, int]:
    """The peak window's slice the design search runs on and its k (every k-th session)."""
    window = peak_window(spec, demand.region, spec.window_s)
    full = expected_requests(spec, demand, window)
    every = max(1, math.ceil(full / spec.settings.slice_requests))
    return replace(window, every=every), every


def expected_requests(spec: FleetSpec, demand: Demand, window: Window) -> float:
    """Requests the window is expected to hold (sessions starting in it x mean turns, plus
    the singular slice), from the rate curve; only sizes the slice, never a result."""
    total = 0.0
    for tenant in tenants_of(spec, demand):
        peak = spec.region(tenant.region).peak_utc_hour * 3600.0
        mid = window.start_s + window.length_s / 2.0
        wave = 1.0 + spec.diurnal_amplitude * math.cos(2 * math.pi * (mid - peak) / 86_400.0)
        sessions = tenant.sessions_per_day / 86_400.0 * wave * window.length_s
        total += sessions * tenant.workload.turns_mean / (1.0 - tenant.workload.singular_share)
    return total


def demand_inputs(
    spec: FleetSpec,
    demand: Demand,
    limits: Mapping[tuple[str, str], int],
    window: Window,
) -> PlannerInputs:
    """Planner inputs of ``demand`` on ``window``'s requests, each stock limited to
    ``limits[(site, chip)]`` chips (stocks with no limit, or under one chip, are left out)."""
    served = spec.models[demand.model]
    roles = sites_of(spec, demand)
    candidates = []
    for stock in spec.inventory:
        playable = tuple(r for r in stock.roles if r in roles.get(stock.site, ()))
        limit = limits.get((stock.site, stock.chip), 0)
        if playable and limit >= 1:
            local = roles[stock.site] == LOCAL_ROLES
            candidates.append(CandidateChip(stock.site, stock.chip, limit, playable, local))
    site_ids = set(roles)
    links = tuple(
        link
        for link in spec.links
        if link.source_site in site_ids
        and link.target_site in site_ids
        and (link.kind is LinkKind.RDMA or link.rtt_ms <= spec.settings.nearby_rtt_ms)
    )
    return PlannerInputs(
        name=f"{spec.name}/{demand.id}",
        model=served.model,
        chips=dict(spec.chips),
        sites=tuple(s for s in spec.sites if s.id in site_ids),
        links=links,
        candidates=tuple(candidates),
        requests=window_requests(spec, tenants_of(spec, demand), window),
        sla=served.sla,
        prices=served.prices,
        config=spec.config,
        table=spec.table,
        settings=spec.planner,
        seed=spec.seed,
    )
