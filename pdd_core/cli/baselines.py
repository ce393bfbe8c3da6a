"""``pdd compare``'s fair baselines: the planner's searched best design of every family.

A scenario's own ``[[baseline.pools]]`` are written by hand: on the reference they ran prefill at
15% and decode at 90%, so "PDD against them" measured the pools, not the families. ``pdd compare``
therefore plans the scenario (``make_plan``: the same search and simulation budget for every
family) and prints each family's cheapest confirmed design with its capacity over independent
workloads and a 95% interval, beside the scenario's hand-written pools measured the same way
(labelled as such) over the same workloads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pdd_core.planner import Plan, inputs_from_scenario, make_plan
from pdd_core.planner.evidence import workloads
from pdd_core.scenario import Scenario
from pdd_core.sim.measure import MeasuredCapacity, Window, measure_capacity
from pdd_core.sim.records import SimulatedRequest
from pdd_core.workload import Request

HAND_WRITTEN = ("pdd", "same-dc", "colocated")


def _hand_written(scenario: Scenario, policy: str, loads: Sequence[Window]) -> MeasuredCapacity:
    def run(load: list[Request]) -> Sequence[SimulatedRequest]:
        return scenario.run(policy, load).records

    cost = scenario.topology_for(policy).cost_per_hour()
    return measure_capacity(
        run,
        [w.requests for w in loads],
        scenario.sla,
        cost,
        judged_from=[w.judged_from for w in loads],
        seed=scenario.config.seed,
    )


def searched_baselines(scenario: Scenario) -> dict[str, Any]:
    """Rows for every searched family and every hand-written policy (module docstring)."""
    inputs = inputs_from_scenario(scenario)
    plan = make_plan(inputs)
    rows: list[dict[str, Any]] = []
    if isinstance(plan, Plan):
        for family in plan.reasons["verdict"]["families"]:
            rows.append({"label": f"searched {family['policy']}", **family})
    loads = workloads(inputs)
    measured: dict[str, MeasuredCapacity] = {}
    if loads:
        for policy in HAND_WRITTEN:
            measured[policy] = _hand_written(scenario, policy, loads)
            design = " + ".join(
                f"{p.role} {p.instances}x{p.chip}@tp{p.tp}xpp{p.pp}/{p.site}"
                for p in scenario.topology_for(policy).pools
            )
            rows.append(
                {
                    "label": f"hand-written {policy}",
                    "policy": policy,
                    "found": True,
                    "design": design,
                    "cost_per_hour": measured[policy].cost_per_hour,
                    "capacity": measured[policy].to_dict(),
                }
            )
    verdict = plan.reasons["verdict"] if isinstance(plan, Plan) else {}
    return {"rows": rows, "verdict": verdict, "feasible": isinstance(plan, Plan)}


def searched_table(found: dict[str, Any]) -> str:
    """The text table of ``searched_baselines``."""
    lines = [
        "design families, searched by the planner (same algorithm and simulation budget each), "
        "beside the scenario's hand-written pools; capacity over independent workloads with a "
        "95% interval",
        f"{'design':<24}{'$/h':>8}{'capacity req/s [95% CI]':>28}{'BCR req/h/$':>12}  shapes",
    ]
    for row in found["rows"]:
        cap = row.get("capacity")
        if not row.get("found"):
            lines.append(f"{row['label']:<24}{'-':>8}{'no design met the SLA':>28}")
            continue
        interval = (
            f"{cap['goodput_rps']:.3f} [{cap['low_rps']:.3f}, {cap['high_rps']:.3f}]"
            if cap
            else "not measured"
        )
        bcr = cap["bcr"] * 3600 if cap and math.isfinite(cap["bcr"]) else math.nan
        lines.append(
            f"{row['label']:<24}{row['cost_per_hour']:>8.1f}{interval:>28}{bcr:>12.2f}  "
            f"{row['design']}"
        )
    verdict = found.get("verdict") or {}
    if verdict:
        lines.append(f"verdict: {verdict['sentence']}")
        lines.append(f"tolerance: {verdict['tolerance']}")
    return "\n".join(lines)
