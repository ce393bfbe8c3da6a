"""Peak memory of a long simulation, keeping every record (list) against streaming them.

Issue #29 item 3: a day-long run must peak under 2 GB per worker. This runs one policy (default
``pdd``) on the scenario's generated agentic workload (default the reference scenario's
``[workload]``) with its sessions multiplied by each ``--scales`` factor (at the same session
rate, so the run lasts that many times longer), each in a fresh subprocess, in both modes:

- ``list``: ``Scenario.run`` on ``WorkloadSpec.requests()``, the whole workload and every
  record in memory (what ``pdd simulate`` does without ``--stream``);
- ``stream``: ``Scenario.run_stream`` on ``WorkloadSpec.stream()``, the workload drawn a
  session at a time and the records folded into ``StreamingSummary`` as they come.

It prints each run's peak RSS (``ru_maxrss``), bytes per request (peak over requests), then per
mode the slope between the two largest scales (bytes per extra request, once the caches and
memos that fill up to a bound are full) and the projection of the peak to ``--project``
requests (default 5 million, a day of a busy region) beside the 2 GB goal. Pin it to one core
on a shared machine:

    taskset -c 1 .venv/bin/python bench/bench_sim_memory.py [--scales 1 4 16 64]
        [--scenario FILE] [--policy pdd] [--modes list stream]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# bench/ is on sys.path: the script's folder.
from worker import run_json

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"
GOAL_MB = 2048.0
MODES = ("list", "stream")

# Runs in a subprocess: one mode at one scale; prints requests, peak RSS and CPU seconds.
WORKER = """
import json, resource, sys, time
from dataclasses import replace
from pdd_core.scenario import load_scenario
path, policy, mode, factor = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
scenario = load_scenario(path)
workload = scenario.workload
generator = replace(workload.generator, sessions=workload.generator.sessions * factor)
scenario = replace(scenario, workload=replace(workload, generator=generator))
# What the interpreter and the imports hold before any request exists.
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
if mode == "list":
    summary = scenario.run(policy, scenario.workload.requests()).summary
else:
    summary = scenario.run_stream(policy, scenario.workload.stream()).summary
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"requests": summary.requests, "served": summary.served,
                  "ttft_p99": summary.ttft_p99, "peak_kb": peak, "before_kb": before,
                  "cpu_s": time.process_time() - cpu, "makespan_s": summary.makespan_s}))
"""


def run_worker(scenario: Path, policy: str, mode: str, factor: int) -> dict[str, float]:
    return run_json(WORKER, [str(scenario), policy, mode, str(factor)], ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--policy", default="pdd")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--project", type=int, default=5_000_000, help="requests to project to")
    args = parser.parse_args()
    print(f"scenario {args.scenario.name}, policy {args.policy}, sessions x {args.scales}")
    print(
        f"{'mode':<8}{'scale':>6}{'requests':>10}{'sim hours':>10}{'peak MB':>9}{'B/request':>11}"
        f"{'CPU s':>8}{'TTFT P99':>10}"
    )
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in args.modes}
    for factor in args.scales:
        for mode in args.modes:
            run = run_worker(args.scenario, args.policy, mode, factor)
            runs[mode].append(run)
            peak_mb = run["peak_kb"] / 1024
            print(
                f"{mode:<8}{factor:>6}{int(run['requests']):>10}{run['makespan_s'] / 3600:>10.1f}"
                f"{peak_mb:>9.0f}{run['peak_kb'] * 1024 / run['requests']:>11.0f}"
                f"{run['cpu_s']:>8.0f}{run['ttft_p99']:>10.3f}",
                flush=True,
            )
    print(f"\n{'mode':<8}{'slope B/request':>16}{f'peak at {args.project:,} req':>22}"
          f"{'goal':>9}{'met':>5}")  # fmt: skip
    for mode, rows in runs.items():
        first, last = rows[0], rows[-1]
        extra = last["requests"] - first["requests"]
        slope = (last["peak_kb"] - first["peak_kb"]) * 1024 / extra if extra > 0 else 0.0
        projected_mb = (
            first["peak_kb"] * 1024 + slope * (args.project - first["requests"])
        ) / 2**20
        print(
            f"{mode:<8}{slope:>16.0f}{f'{projected_mb:,.0f} MB':>22}{f'{GOAL_MB:,.0f} MB':>9}"
            f"{'yes' if projected_mb <= GOAL_MB else 'no':>5}"
        )
    print(
        "peak MB: the worker's ru_maxrss (interpreter and imports included, about "
        f"{runs[args.modes[0]][0]['before_kb'] / 1024:.0f} MB before the first request); "
        "slope: extra peak per extra request between the two largest scales, projected "
        "linearly from the largest"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
