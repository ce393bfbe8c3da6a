"""``pdd sweep``: a capacity search per (scenario, policy, WAN bandwidth), one table.

The in-process form of the control plane's ``POST /api/v1/sweeps/`` (which fans the same points
out to Celery workers): both call ``pdd_core.sweep``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pdd_core.cli.simulate import POLICY_NAMES


def register(subparsers: Any) -> None:
    sweep = subparsers.add_parser(
        "sweep",
        help="capacity of every (scenario, policy, WAN bandwidth) point, in one table",
        description="For each scenario file, policy and WAN bandwidth: simulate the workload at "
        "its own rate, then search the highest rate that meets the scenario's SLA; print one "
        "row per point (goodput, SLA, capacity, cost, BCR).",
    )
    sweep.add_argument("scenarios", nargs="+", help="scenario files (TOML)")
    sweep.add_argument(
        "--policy",
        action="append",
        choices=POLICY_NAMES,
        help="a policy to run (repeat for several; default: all four)",
    )
    sweep.add_argument(
        "--wan-gbps",
        action="append",
        type=float,
        help="set every WAN link to this bandwidth (repeat for several; default: the scenario's)",
    )
    sweep.add_argument(
        "--capacity-iterations",
        type=int,
        default=3,
        help="bisection steps of each capacity search after bracketing (default: 3)",
    )
    sweep.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    sweep.set_defaults(func=run_sweep_verb)


def run_sweep_verb(args: argparse.Namespace) -> int:
    from pdd_core.scenario import load_scenario
    from pdd_core.sweep import run_sweep, sweep_points, sweep_table

    points = sweep_points(args.scenarios, args.policy or POLICY_NAMES, args.wan_gbps or ())

    def report(done: int, row: Any) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{done}/{len(points)} points ({row.scenario} {row.policy})")
            sys.stderr.flush()

    rows = run_sweep(load_scenario, points, iterations=args.capacity_iterations, progress=report)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        print(sweep_table(rows))
    return 0
