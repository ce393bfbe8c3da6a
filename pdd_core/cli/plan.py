"""``pdd plan SCENARIO [--json] [--out DIR]``: size P, RLD and MD and tune the routing table.

Runs ``pdd_core.planner.make_plan`` on a scenario file with a progress bar on stderr. Text
output prints the pools, the cost table against the best homogeneous same-dc design, the
reasons, the bathtub as a text chart, and the wall time; ``--json`` prints the plan as one JSON
object (``pools``, ``routing_table``, ``predicted``, ``baseline``, ``bathtub``, ``reasons``);
``--out DIR`` also writes ``DIR/plan.json``. An infeasible request prints why and exits 1.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdd_core.units import BCR_UNIT, SECONDS_PER_HOUR


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan P/RLD/MD pools and routing thresholds for a scenario",
        description="Search chips, tp, counts and routing thresholds with the analytic capacity "
        "model, verify the best designs in the simulator, and print the plan.",
    )
    parser.add_argument("scenario", help="scenario file (TOML) with an optional [planner] table")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    parser.add_argument("--out", help="also write DIR/plan.json")
    parser.add_argument("--trace", help="plan for this trace instead of the scenario's workload")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="a fleet file ([fleet] table): worker processes its tasks fan out over",
    )
    parser.set_defaults(func=run_plan)


def _progress_bar() -> Callable[[float, str], None]:
    """A one-line bar on stderr with the phase's message (silent when not a terminal)."""
    if not sys.stderr.isatty():
        return lambda fraction, message: None

    def update(fraction: float, message: str) -> None:
        filled = round(30 * min(max(fraction, 0.0), 1.0))
        sys.stderr.write(f"\rplan [{'#' * filled}{'.' * (30 - filled)}] {message[:60]:<60}")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return update


def run_plan(args: argparse.Namespace) -> int:
    from pdd_core.planner import inputs_from_scenario, make_plan
    from pdd_core.scenario import load_scenario

    if _is_fleet_file(args.scenario):
        return _run_fleet(args)
    started = time.perf_counter()
    scenario = load_scenario(args.scenario, trace=args.trace)
    outcome = make_plan(inputs_from_scenario(scenario), _progress_bar())
    wall = time.perf_counter() - started
    payload = outcome.to_dict()
    payload["wall_s"] = round(wall, 2)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "plan.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(payload, indent=2))
    else:
        print(render_text(payload))
        if args.out:
            print(f"wrote {Path(args.out) / 'plan.json'}")
    return 0 if payload["feasible"] else 1


def _is_fleet_file(path: str) -> bool:
    from pdd_core.fleet import is_fleet
    from pdd_core.scenario import read_toml

    try:
        return is_fleet(read_toml(Path(path)))
    except (OSError, ValueError):
        return False  # the scenario loader says what is wrong with it


def _run_fleet(args: argparse.Namespace) -> int:
    """A fleet file: ``pdd_core.fleet.plan_fleet`` over ``--workers`` processes."""
    from pdd_core.fleet import load_fleet, plan_fleet, process_map
    from pdd_core.fleet.report import render_fleet

    if args.trace:
        raise ValueError(
            "--trace: a fleet generates its own day; give a scenario to replay a trace"
        )
    load_fleet(args.scenario)  # every error in the file before any worker starts
    payload = plan_fleet(args.scenario, process_map(args.workers))
    payload["workers"] = args.workers
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "plan.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(payload, indent=2) if args.json else render_fleet(payload))
    return 0 if all(d.get("fleet") for d in payload["demands"]) else 1


def _num(value: Any, scale: float = 1.0, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value * scale:.{digits}g}"


def render_text(plan: dict[str, Any]) -> str:
    """The human view of a plan dict (``Plan.to_dict`` / ``Infeasible.to_dict``)."""
    lines = [f"plan for {plan['name']} ({plan['model']})"]
    if not plan["feasible"]:
        lines.append("INFEASIBLE: " + plan["explanation"])
        lines.append(f"wall time {plan.get('wall_s', 0):.1f} s")
        return "\n".join(lines)
    reasons = plan["reasons"]
    verdict = reasons.get("verdict") or {}
    lines.append(f"recommended: {plan.get('policy', 'pdd')}")
    if verdict:
        lines.append(f"verdict: {verdict['sentence']}")
    lines.append("")
    lines.append(
        f"{'pool':<8}{'site':<8}{'chip':<10}{'inst':>5}{'shape':>14}{'chips':>7}{'$/h':>9}"
    )
    for pool in plan["pools"]:
        shape = f"tp{pool['tp']}"
        for key in ("pp", "dp", "ep"):
            if pool.get(key, 1) > 1:
                shape += f"x{key}{pool[key]}"
        lines.append(
            f"{pool['role']:<8}{pool['site']:<8}{pool['chip']:<10}{pool['instances']:>5}"
            f"{shape:>14}{pool['chips']:>7}{pool['cost_per_hour']:>9.1f}"
        )
    if plan.get("rld_mode"):
        lines.append(f"RLD mode: {plan['rld_mode']}")
    table = plan["routing_table"]
    lines.append(
        "routing: transfer budget {transfer_budget_s} s, singular input >= "
        "{singular_min_input_tokens} / output < {singular_max_output_tokens} / hit <= "
        "{singular_max_hit}, handoff chunk {handoff_chunk_tokens}, extend-decode above "
        "{extend_decode_min_tokens} tokens, one-shot at RLD load >= {rld_load_threshold}".format(
            **table
        )
    )
    lines.append("")
    lines.append(_cost_and_figures(plan))
    lines.append("")
    lines.append("reasons:")
    extra = [reasons.get(k) or "" for k in ("rld_mode", "model", "arrivals")]
    for sentence in [reasons["summary"], *reasons["pools"], *reasons["routing"], *extra]:
        if sentence:
            lines.append(f"  - {sentence}")
    lines.append(f"  - {reasons['comparison']}")
    if verdict:
        lines.append("")
        lines.append(
            f"{'design family':<12}{'$/h':>9}{'good req/$':>11}{'$/req P':>10}"
            f"{'$/ktok D':>10}  design"
        )
        for row in verdict["designs"]:
            lines.append(
                f"{row['policy']:<12}{row['cost_per_hour']:>9.1f}"
                f"{_num(row['bcr'], SECONDS_PER_HOUR, 4):>11}"
                f"{_num(row['prefill_usd_per_request'], 1.0, 3):>10}"
                f"{_num(row['decode_usd_per_ktok'], 1.0, 3):>10}  {row['design']}"
            )
    lines.append("")
    lines.append(bathtub_chart(plan["bathtub"]))
    lines.append("")
    lines.append(f"wall time {plan.get('wall_s', 0):.1f} s")
    return "\n".join(lines)


def _cost_and_figures(plan: dict[str, Any]) -> str:
    rows = plan["baseline"]["cost_table"]
    out = [
        "cost table: the plan against the best homogeneous same-dc design (verified alike)",
        f"{'':<10}{'plan':<38}{'$/h':>8}   {'homogeneous same-dc':<38}{'$/h':>8}",
    ]
    for row in rows:
        out.append(
            f"{row['role']:<10}{row['plan']:<38}{_num(row['plan_cost_per_hour'], digits=4):>8}   "
            f"{row['baseline']:<38}{_num(row['baseline_cost_per_hour'], digits=4):>8}"
        )
    mine = plan["predicted"]
    theirs = (plan["baseline"] or {}).get("predicted") or {}
    out.append("")
    out.append(f"{'simulated':<26}{'plan':>12}{'baseline':>12}")
    for key, label, scale in (
        ("ttft_p50", "TTFT P50 (s)", 1.0),
        ("ttft_p90", "TTFT P90 (s)", 1.0),
        ("ttft_p99", "TTFT P99 (s)", 1.0),
        ("tpot_p50", "TPOT P50 (ms)", 1e3),
        ("tpot_p90", "TPOT P90 (ms)", 1e3),
        ("tpot_p99", "TPOT P99 (ms)", 1e3),
        ("goodput_rps", "goodput (req/s)", 1.0),
        ("cost_per_hour", "cost ($/h)", 1.0),
        ("bcr", f"BCR ({BCR_UNIT})", SECONDS_PER_HOUR),
        ("bcr_revenue", "revenue / cost", 1.0),
        ("handoff_kv_share", "handoffs shipping KV", 1.0),
        ("rejected", "rejected (429)", 1.0),
        ("sla_met", "SLA met", 1.0),
    ):
        a, b = mine.get(key), theirs.get(key)
        if key == "sla_met":
            out.append(f"{label:<26}{a!s:>12}{str(b) if theirs else '-':>12}")
        else:
            out.append(f"{label:<26}{_num(a, scale, 4):>12}{_num(b, scale, 4):>12}")
    return "\n".join(out)


def bathtub_chart(bathtub: dict[str, Any], width: int = 32) -> str:
    """Revenue per cost against mean hit rate as bars, with the re-sized series beside it.

    The bars are this deployment at the largest rate it serves within the SLA; ``re-sized``
    is the same chips sized for the workload's own rate at that hit rate (``-`` where no size
    within the limits meets the SLA). The valley and the current workload are marked.
    """
    points = bathtub["points"]
    current = bathtub["current"]
    values = [p["revenue_per_cost"] or 0.0 for p in points]
    top = max([*values, current["revenue_per_cost"] or 0.0, 1e-12])
    lines = [
        "bathtub: revenue per cost ($ earned per $ of hardware/h) against mean hit rate; bars: "
        "this deployment at its largest SLA rate; re-sized: these chips sized for the workload",
        f"{'hit':>6} {'rev/cost':>9} {'BCR':>7} {'re-sized $/h':>13} {'rev/cost':>9} "
        f"{'homog. $/h':>11} {'PDD pays':>9}  ",
    ]
    rows = [(p, False) for p in points] + [(current, True)]
    rows.sort(key=lambda r: (r[0]["hit_rate"], r[1]))
    valley = bathtub["valley"]
    for point, is_current in rows:
        value = point["revenue_per_cost"] or 0.0
        bar = "#" * round(width * value / top)
        mark = ""
        if is_current:
            mark = "  <- current workload"
        elif valley and point["hit_rate"] == valley["hit_rate"]:
            mark = "  <- valley"
        lines.append(
            f"{point['hit_rate']:>6.1%} {value:>9.3f} {_num(point['bcr'], SECONDS_PER_HOUR, 3):>7} "
            f"{_num(point.get('resized_cost_per_hour'), 1.0, 4):>13} "
            f"{_num(point.get('resized_revenue_per_cost'), 1.0, 3):>9} "
            f"{_num(point.get('homogeneous_cost_per_hour'), 1.0, 4):>11} "
            f"{_pays(point.get('pdd_pays')):>9}  {bar}{mark}"
        )
    lines.append(
        f"BCR in {BCR_UNIT}; homog.: the best homogeneous design's chips re-sized for "
        "the same workload; PDD pays where its re-sized cost is below that"
    )
    return "\n".join(lines)


def _pays(value: Any) -> str:
    if value is None:
        return "-"
    return "yes" if value else "no"
