"""``pdd compare``: every policy of a scenario on the same workload, side by side.

It prints a table with ratios to ``same-dc`` (or, with ``--json``, exactly the keys of
``pdd_core.sim.COMPARE_KEYS`` per policy), each policy's capacity at the SLA, and the planner's
searched designs of each family as baselines (the scenario's hand-written pools still run,
labelled as such).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, replace
from typing import Any

from pdd_core.cli.simulate import POLICY_NAMES, json_safe, progress_bar
from pdd_core.report import COMPARE_ROWS
from pdd_core.units import BCR_UNIT, SECONDS_PER_HOUR


def register(subparsers: Any) -> None:
    compare = subparsers.add_parser(
        "compare",
        help="run every policy of a scenario on the same workload",
        description="Simulate colocated, same-dc, naive-cross-dc and pdd on one workload and "
        "print them side by side with ratios to same-dc.",
    )
    compare.add_argument("scenario", help="scenario file (TOML)")
    compare.add_argument("--trace", help="replay this trace instead of the scenario's workload")
    compare.add_argument("--json", action="store_true", help="print one JSON object")
    compare.add_argument(
        "--no-capacity",
        action="store_true",
        help="skip the capacity search and the searched baselines (fixed-load figures only)",
    )
    compare.add_argument(
        "--no-search",
        action="store_true",
        help="skip the planner's searched baselines (only the scenario's hand-written pools)",
    )
    compare.add_argument(
        "--capacity-iterations",
        type=int,
        default=3,
        help="bisection steps of the capacity search after bracketing (default: 3)",
    )
    compare.set_defaults(func=run_compare)


def compare_scenario(
    scenario_path: str,
    trace: str | None = None,
    progress: bool = True,
    *,
    capacity: bool = True,
    capacity_iterations: int = 3,
) -> dict[str, Any]:
    """Run every policy of a scenario on the same requests.

    Returns ``{"scenario", "results": {policy: SimResult}, "capacity": {policy: Capacity},
    "offered_rps", "requests"}`` (the workload's own arrival rate and size); ``capacity`` is
    empty when the search is skipped. The capacity search (``pdd_core.sweep.policy_run``, one
    point of a sweep) runs each design at more or fewer sessions until it finds the highest
    rate at which the scenario's SLA holds, rejections counted as misses.
    """

    from pdd_core.scenario import load_scenario
    from pdd_core.sim.capacity import offered_rps
    from pdd_core.sim.summary import trace_hits, with_trace_hits
    from pdd_core.sweep import policy_run

    scenario = load_scenario(scenario_path, trace=trace)
    requests = scenario.workload.requests()
    rates = trace_hits(requests, scenario.config.block_size)
    results = {}
    capacities = {}
    for policy in POLICY_NAMES:
        bar = progress_bar(len(requests), policy) if progress else None
        result, found = policy_run(
            scenario,
            policy,
            requests,
            capacity=capacity,
            iterations=capacity_iterations,
            progress=bar,
        )
        results[policy] = replace(result, summary=with_trace_hits(result.summary, rates))
        if found is not None:
            capacities[policy] = found
    return {
        "scenario": scenario,
        "results": results,
        "capacity": capacities,
        "offered_rps": offered_rps(requests),
        "requests": len(requests),
    }


def run_compare(args: argparse.Namespace) -> int:
    if args.capacity_iterations < 0:
        raise ValueError("--capacity-iterations: must be non-negative")
    ran = compare_scenario(
        args.scenario,
        args.trace,
        capacity=not args.no_capacity,
        capacity_iterations=args.capacity_iterations,
    )
    results = ran["results"]
    capacities = ran["capacity"]
    sla = ran["scenario"].sla
    fixed = {p: r.summary.goodput_rps for p, r in results.items()}
    notes = {p: capacity_note(p, fixed[p], capacity_dict(c)) for p, c in capacities.items()}
    if args.json:
        payload: dict[str, Any] = {
            "sla": asdict(sla),
            "offered_rps": ran["offered_rps"],
            "requests": ran["requests"],
            "policies": {p: json_safe(r.summary.compare_dict()) for p, r in results.items()},
        }
        if capacities:
            payload["capacity"] = {p: json_safe(capacity_dict(c)) for p, c in capacities.items()}
            payload["capacity_notes"] = {p: n for p, n in notes.items() if n}
        if capacities and not args.no_search:
            from pdd_core.cli.baselines import searched_baselines

            payload["searched"] = json_safe(searched_baselines(ran["scenario"]))
        print(json.dumps(payload, indent=2))
        return 0
    print(sla_line(sla))
    print(
        f"offered load: {ran['requests']:,} requests at {ran['offered_rps']:.3g} req/s "
        "(requests over their arrival span); every policy serves these same requests"
    )
    print()
    print("hand-written pools (the scenario's [[pools]] and [[baseline.pools]]):")
    print(compare_table({p: r.summary.compare_dict() for p, r in results.items()}))
    if capacities:
        print()
        print(capacity_table({p: capacity_dict(c) for p, c in capacities.items()}))
        for note in notes.values():
            if note:
                print(note)
    if capacities and not args.no_search:
        from pdd_core.cli.baselines import searched_baselines, searched_table

        print()
        print(searched_table(searched_baselines(ran["scenario"])))
    return 0


def sla_line(sla: Any) -> str:
    """The scenario's SLA as ``pdd compare`` prints it (``pdd_core.metrics.window_sla``)."""
    return (
        f"SLA: TTFT P90 <= {sla.ttft_p90_s:g} s, P99 <= {sla.ttft_p99_s:g} s; TPOT P90 <= "
        f"{sla.tpot_p90_s * 1e3:g} ms, P99 <= {sla.tpot_p99_s * 1e3:g} ms (a run meets it when "
        "all four hold, rejected requests counted as misses)"
    )


def capacity_note(policy: str, fixed_goodput: float, capacity: dict[str, Any]) -> str:
    """Why a policy's fixed-load goodput exceeds its capacity goodput ("" when it does not).

    Fixed-load goodput counts every request that met its own targets, over the makespan, even
    when the run as a whole missed the SLA; capacity is the offered rate of the highest load at
    which the whole run met it. A fixed-load run that met the SLA has goodput at most its
    offered rate, which capacity then reaches, so the excess arises only when the scenario's
    own load (session factor 1) misses the SLA and the search settles below it.
    """
    goodput = capacity["goodput_rps"]
    if not fixed_goodput > goodput:
        return ""
    own = next((p for p in capacity["probes"] if p["factor"] == 1.0), None)
    if own is None or own["sla_met"]:
        return (
            f"{policy}: fixed-load goodput {fixed_goodput:.3g} req/s exceeds capacity "
            f"{goodput:.3g} req/s although the scenario's own load met the SLA: the verdict is "
            "not monotone in load here (queues are noisy); bisection kept one boundary."
        )
    return (
        f"{policy}: fixed-load goodput {fixed_goodput:.3g} req/s exceeds its "
        f"capacity {goodput:.3g} req/s because the scenario's own load "
        f"({own['offered_rps']:.3g} req/s) misses the SLA ({own['violated']} "
        f"over its target) while {own['attainment']:.0%} of its requests still met "
        "their own targets and count as good; capacity asks for the SLA over the whole run, "
        f"which held only up to x{capacity['session_factor']:.3g} the sessions."
    )


def capacity_dict(capacity: Any) -> dict[str, Any]:
    """The JSON figures of one ``Capacity`` (the probes as a list of small objects)."""
    return {
        "goodput_rps": capacity.goodput_rps,
        "bcr": capacity.bcr,
        "cost_per_hour": capacity.cost_per_hour,
        "session_factor": capacity.factor,
        "bound": capacity.bound,
        "probes": [
            {
                "factor": p.factor,
                "offered_rps": p.offered_rps,
                "requests": p.requests,
                "sla_met": p.met,
                "violated": p.violated,
                "attainment": p.attainment,
            }
            for p in capacity.probes
        ],
    }


CAPACITY_ROWS: tuple[tuple[str, str, float], ...] = (
    ("goodput_rps", "capacity goodput (req/s)", 1.0),
    ("cost_per_hour", "cost ($/h)", 1.0),
    ("bcr", f"capacity BCR ({BCR_UNIT})", SECONDS_PER_HOUR),
    ("session_factor", "sessions at capacity (x)", 1.0),
)


def capacity_table(rows: dict[str, dict[str, Any]], baseline: str = "same-dc") -> str:
    """The capacity figures of every design at the scenario's SLA, side by side."""
    table = compare_table(rows, baseline, CAPACITY_ROWS)
    notes = [
        f"{policy}: search stopped at its {row['bound']} (the SLA "
        + ("held at the highest load tried)" if row["bound"] == "max_factor" else "never held)")
        for policy, row in rows.items()
        if row["bound"]
    ]
    head = "capacity: highest arrival rate meeting the SLA (rejections count as misses)"
    return "\n".join([head, table, *notes])


def compare_table(
    rows: dict[str, dict[str, Any]],
    baseline: str = "same-dc",
    spec: tuple[tuple[str, str, float], ...] = COMPARE_ROWS,
) -> str:
    """A plain-text table: one column per policy, ``(x.xx)`` ratio to ``baseline`` after it."""
    policies = list(rows)
    width = 22
    lines = [f"{'':<26}" + "".join(f"{p:>{width}}" for p in policies)]
    for key, label, scale in spec:
        cells = []
        base = rows.get(baseline, {}).get(key, math.nan)
        for policy in policies:
            value = rows[policy][key]
            text = _fmt(value * scale)
            if policy != baseline and base and not math.isnan(base) and not math.isnan(value):
                text += f" ({value / base:.2f}x)"
            cells.append(f"{text:>{width}}")
        lines.append(f"{label:<26}" + "".join(cells))
    lines.append(f"ratios (x) are to {baseline}")
    return "\n".join(lines)


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value == int(value) and abs(value) >= 10:
        return f"{int(value)}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.1f}"
