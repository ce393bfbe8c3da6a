"""Plan a fleet: its day, each demand's designs, the inventory shared between them.

Four phases, each a list of independent tasks a caller fans out (``fleet.fanout``: in this
process, a process pool for ``pdd plan``, a Celery group in the control plane). Every task
takes the fleet file's tables (parsed TOML, plain data) and names, and returns plain JSON
data, so it crosses any process or machine boundary as it is.

1. ``day_task`` per tenant: generates the tenant's whole day (millions of requests across the
   fleet, none kept) and counts requests and tokens per hour.
2. ``screen_task`` per demand: the analytic model (``planner.run.prepare``) on the demand's peak
   slice against the whole inventory of its sites: the chips the cheapest analytic design of
   any family needs per (site, chip), scaled to the full window.
3. ``allocate`` (here, no task): each (site, chip) stock is split between the demands that may
   use it in proportion to those needs, each with a small reserve so a demand the analytic model
   did not send there can still be placed.
4. ``demand_task`` per demand: the planner's whole search (every family, simulations, measured
   capacity, verdict) on the peak slice within its share; then the design, scaled by k to the
   full rate, is simulated on the whole peak window at full rate and shrunk by bisection while
   it still meets the SLA (``fleet.scale``).
"""

from __future__ import annotations

import math
import os
import resource
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pdd_core.fleet.demand import (
    Demand,
    demand_by_id,
    demand_inputs,
    demands,
    slice_window,
    stocks_of,
)
from pdd_core.fleet.fanout import Mapper, serial_map
from pdd_core.fleet.scale import scale_to_window
from pdd_core.fleet.spec import FleetSpec, fleet_from_dict, load_fleet
from pdd_core.fleet.traffic import DAY_S, day_requests
from pdd_core.planner.design import FAMILIES
from pdd_core.planner.result import Plan
from pdd_core.planner.run import make_plan, prepare
from pdd_core.scenario import read_toml

# Of each stock, the share set aside for every demand that may use it, whatever the analytic
# model said (it ranks designs; the simulator may confirm another site or chip).
RESERVE = 0.05


def _task_stats(started_cpu: float, started_wall: float) -> dict[str, Any]:
    return {
        "cpu_s": time.process_time() - started_cpu,
        "wall_s": time.monotonic() - started_wall,
        "pid": os.getpid(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def day_task(fleet: Mapping[str, Any], tenant_id: str) -> dict[str, Any]:
    """Phase 1: ``tenant_id``'s day, per UTC hour of arrival (the open-loop draft's times)."""
    cpu, wall = time.process_time(), time.monotonic()
    spec = fleet_from_dict(fleet)
    tenant = next(t for t in spec.tenants if t.id == tenant_id)
    hours = [[0, 0, 0] for _ in range(24)]
    for request in day_requests(spec, tenant):
        row = hours[int(request.arrival_s % DAY_S // 3600)]
        row[0] += 1
        row[1] += request.input_tokens
        row[2] += request.output_tokens
    return {
        "tenant": tenant_id,
        "model": tenant.model,
        "region": tenant.region,
        "requests_per_hour": [r[0] for r in hours],
        "input_tokens_per_hour": [r[1] for r in hours],
        "output_tokens_per_hour": [r[2] for r in hours],
        **_task_stats(cpu, wall),
    }


def screen_task(fleet: Mapping[str, Any], demand_id: str) -> dict[str, Any]:
    """Phase 2: the chips per stock the cheapest analytic design of ``demand_id`` needs at
    full rate (its slice's design times k)."""
    cpu, wall = time.process_time(), time.monotonic()
    spec = fleet_from_dict(fleet)
    demand = demand_by_id(spec, demand_id)
    window, every = slice_window(spec, demand)
    whole = {key: _stock(spec, key) // every for key in stocks_of(spec, demand)}
    inputs = demand_inputs(spec, demand, whole, window)
    found = prepare(inputs).found
    ranked = [s for family in FAMILIES for s in found.ranked(family)[:1]]
    needs: dict[str, int] = {}
    cost = None
    if ranked:
        best = min(ranked, key=lambda s: s.evaluation.cost_per_hour)
        cost = best.evaluation.cost_per_hour * every
        for pool in best.design.pools:
            key = f"{pool.site}/{pool.chip}"
            needs[key] = needs.get(key, 0) + pool.chips * every
    return {
        "demand": demand_id,
        "every": every,
        "slice_requests": len(inputs.requests),
        "needs": needs,
        "analytic_cost_per_hour": cost,
        **_task_stats(cpu, wall),
    }


def allocate(spec: FleetSpec, screens: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Phase 3: each demand's chips per stock (``"site/chip"``), summing to at most the stock."""
    needs = {s["demand"]: dict(s["needs"]) for s in screens}
    users: dict[str, list[str]] = {}
    for demand in demands(spec):
        for site, chip in stocks_of(spec, demand):
            users.setdefault(f"{site}/{chip}", []).append(demand.id)
    limits: dict[str, dict[str, int]] = {d: {} for d in needs}
    for key, ids in users.items():
        stock = _stock(spec, _stock_key(key))
        asked = {d: needs.get(d, {}).get(key, 0) for d in ids}
        reserve = RESERVE * stock / len(ids)
        weights = {d: asked[d] + reserve for d in ids}
        if sum(asked.values()) <= stock:
            # Enough for all: each gets what it asked, the rest split by the same weights.
            spare = stock - sum(asked.values())
            total = sum(weights.values())
            share = {d: asked[d] + spare * weights[d] / total for d in ids}
        else:
            total = sum(weights.values())
            share = {d: stock * weights[d] / total for d in ids}
        for d in ids:
            limits.setdefault(d, {})[key] = math.floor(share[d])
    return limits


def demand_task(
    fleet: Mapping[str, Any], demand_id: str, limits: Mapping[str, int]
) -> dict[str, Any]:
    """Phase 4: the planner's search on the slice within ``limits``, then the design at full
    rate on the whole peak window (``scale_to_window``)."""
    cpu, wall = time.process_time(), time.monotonic()
    spec = fleet_from_dict(fleet)
    demand = demand_by_id(spec, demand_id)
    window, every = slice_window(spec, demand)
    full = {_stock_key(k): v for k, v in limits.items()}
    sliced = {key: v // every for key, v in full.items()}
    inputs = demand_inputs(spec, demand, sliced, window)
    outcome = make_plan(inputs)
    result: dict[str, Any] = {
        "demand": demand_id,
        "every": every,
        "limits": dict(limits),
        "slice_requests": len(inputs.requests),
        "slice_plan": outcome.to_dict(),
    }
    simulated = len(inputs.requests) * len(outcome.search.get("simulations", []))
    if isinstance(outcome, Plan):
        whole = demand_inputs(spec, demand, full, replace(window, every=1))
        scaled = scale_to_window(whole, outcome, every, spec.settings.scale_steps)
        result["fleet"] = scaled.to_dict(whole.chips)
        simulated += scaled.simulated_requests
    result["simulated_requests"] = simulated
    result.update(_task_stats(cpu, wall))
    return result


def _stock_key(text: str) -> tuple[str, str]:
    """``"site/chip"`` (the JSON form of a stock's key) as ``(site, chip)``."""
    site, chip = text.split("/", 1)
    return site, chip


def _stock(spec: FleetSpec, key: tuple[str, str]) -> int:
    return sum(s.chips for s in spec.inventory if (s.site, s.chip) == key)


def plan_fleet(path: Path | str, mapper: Mapper = serial_map) -> dict[str, Any]:
    """Every phase in order, each phase's tasks through ``mapper``; the fleet plan as data."""
    started_cpu, started = time.process_time(), time.monotonic()
    spec = load_fleet(path)
    tables = read_toml(Path(path))
    phases: dict[str, float] = {}
    day = mapper(day_task, [(tables, t.id) for t in spec.tenants])
    phases["day"] = time.monotonic() - started
    all_demands: tuple[Demand, ...] = demands(spec)
    screens = mapper(screen_task, [(tables, d.id) for d in all_demands])
    phases["screen"] = time.monotonic() - started - sum(phases.values())
    limits = allocate(spec, screens)
    # Largest first, so the longest task does not start last.
    order = sorted(all_demands, key=lambda d: -_size(screens, d.id))
    planned = mapper(demand_task, [(tables, d.id, limits[d.id]) for d in order])
    phases["plan"] = time.monotonic() - started - sum(phases.values())
    tasks = [*day, *screens, *planned]
    return {
        "name": spec.name,
        "description": spec.description,
        "chips": spec.total_chips(),
        "inventory": [{"site": s.site, "chip": s.chip, "chips": s.chips} for s in spec.inventory],
        "day": day,
        "screens": screens,
        "demands": planned,
        "timing": {
            "wall_s": time.monotonic() - started,
            "phases_wall_s": phases,
            "tasks_cpu_s": sum(t["cpu_s"] for t in tasks),
            # This process's own work (loading, allocating), less the tasks it ran itself.
            "parent_cpu_s": time.process_time()
            - started_cpu
            - sum(t["cpu_s"] for t in tasks if t["pid"] == os.getpid()),
            "peak_rss_mb_per_worker": _peaks(tasks),
            "simulated_requests": sum(t["simulated_requests"] for t in planned),
        },
    }


def _size(screens: Sequence[Mapping[str, Any]], demand_id: str) -> float:
    row = next(s for s in screens if s["demand"] == demand_id)
    return float(sum(row["needs"].values()))


def _peaks(tasks: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    peaks: dict[str, float] = {}
    for task in tasks:
        pid = str(task["pid"])
        peaks[pid] = max(peaks.get(pid, 0.0), float(task["peak_rss_mb"]))
    return peaks
