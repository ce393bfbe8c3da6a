"""``pdd parity SCENARIO``: the simulator and a live plane on the same workload, side by side.

See ``pdd_core.agent.parity``: the scenario's PDD topology runs in the simulator and as a live
``pdd up`` plane (timed engine), fed the same requests at native size; the table gives TTFT
P50/P90/P99, TPOT, the pipeline mix, the RLD token share and WAN bytes with their ratios.
``--trace`` adds the milestones of the live P50 and P90 requests beside the simulator's.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "parity",
        help="simulate a scenario and run it on a live plane; print both side by side",
        description="Run SCENARIO's pdd policy in the simulator and on a live pdd up plane "
        "built from its topology (timed engine, emulated WAN) on the same requests; print "
        "TTFT, TPOT, pipeline mix, RLD share and WAN bytes with live/sim ratios. The live "
        "run takes the workload's real time.",
    )
    parser.add_argument("scenario", metavar="SCENARIO")
    parser.add_argument("--max-requests", type=int, help="first N requests of the workload")
    parser.add_argument("--payload-scale", type=float, default=0.001)
    parser.add_argument("--run-dir", help="where the live plane writes its logs and journals")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="print the timeline (gateway, P, WAN, MD milestones) of the live P50 and P90 "
        "requests beside the simulator's",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os
    import tempfile
    from pathlib import Path

    from pdd_core.agent.parity import host_line, measured, run_live, simulated, table, traced
    from pdd_core.agent.trace import ENV
    from pdd_core.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    requests = scenario.workload.requests()
    if args.max_requests:
        requests = requests[: args.max_requests]
    span = requests[-1].arrival_s - requests[0].arrival_s if requests else 0.0
    print(f"scenario {scenario.name}: {len(requests)} requests over {span:.0f} s", flush=True)
    records = scenario.run("pdd", requests).records
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="pdd-parity-"))
    if args.trace:
        os.environ[ENV] = "1"  # the plane's agents inherit it
    try:
        results, waited = run_live(scenario, requests, run_dir, payload_scale=args.payload_scale)
    except (ValueError, RuntimeError) as exc:
        print(f"pdd parity: {exc}")
        return 2
    print(table(simulated(records), measured(results)))
    if args.trace:
        print()
        print(traced(requests, records, results, sorted((run_dir / "run").glob("*.log"))))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"host load average (1, 5, 15 min): {load} (the live side shares this host's CPUs)")
    print(host_line(waited))
    print(f"live plane logs and journals: {run_dir}")
    return 0
