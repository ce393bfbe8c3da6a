"""The fleet plan (issue #29) with 1 and 2 worker processes: wall time, speed-up, CPU, memory.

Runs ``pdd_core.fleet.plan_fleet`` on a fleet file (default ``fixtures/fleets/fleet.toml``:
five sites, 10,240 chips, eight tenants, about 5.9 million requests a day) once per worker
count, each in a fresh subprocess with its own process pool (``fleet.fanout.process_map``,
what ``pdd plan FLEET --workers N`` uses), and prints per run: wall seconds per phase and in
all, CPU seconds of the tasks and of the coordinating process, the peak resident memory of
each worker, the simulated requests and the CPU per simulated request; then the speed-up of
the last worker count over the first, beside issue #29's goals (the whole plan within 20
minutes on 2 cores with 2 workers; under 2 GB per worker). Both runs plan the same fleet and
must find the same designs (the tasks are deterministic), which the bench checks.

    .venv/bin/python bench/bench_fleet.py [--fleet FILE] [--workers 1 2]

Figures are this machine's, shared with whatever else runs on it: the CPU per simulated
request is the figure that carries over.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "fixtures" / "fleets" / "fleet.toml"
GOAL_WALL_S = 20 * 60  # with 2 workers on 2 cores
GOAL_PEAK_MB = 2048  # per worker


def run(fleet: Path, workers: int) -> dict[str, Any]:
    """One ``pdd plan FLEET --workers N --json`` in a fresh process."""
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [sys.executable, "-m", "pdd_core", "plan", str(fleet), "--workers", str(workers),
             "--out", out, "--json"],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode not in (0, 1):
            raise SystemExit(f"pdd plan failed ({done.returncode}):\n{done.stderr[-3000:]}")
        plan: dict[str, Any] = json.loads((Path(out) / "plan.json").read_text())
    return plan


def designs(plan: dict[str, Any]) -> list[str]:
    return [f"{d['demand']}: {(d.get('fleet') or {}).get('design')}" for d in plan["demands"]]


def row(workers: int, plan: dict[str, Any]) -> str:
    t = plan["timing"]
    phases = " / ".join(f"{v:.0f}" for v in t["phases_wall_s"].values())
    peak = max(t["peak_rss_mb_per_worker"].values())
    cpu = t["tasks_cpu_s"] + t["parent_cpu_s"]
    per_request = cpu / t["simulated_requests"] * 1e6 if t["simulated_requests"] else float("nan")
    return (
        f"| {workers} | {t['wall_s']:.0f} | {phases} | {cpu:.0f} | {peak:.0f} | "
        f"{len(t['peak_rss_mb_per_worker'])} | {t['simulated_requests']:,} | {per_request:.0f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", type=Path, default=FLEET)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    plans = {w: run(args.fleet, w) for w in args.workers}
    day = sum(sum(t["requests_per_hour"]) for t in next(iter(plans.values()))["day"])
    print(f"fleet {args.fleet.name}: {day:,} requests in its day")
    print("| workers | wall s | day / screen / plan s | CPU s | peak MB per worker | "
          "processes | simulated requests | CPU us per simulated request |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for workers, plan in plans.items():
        print(row(workers, plan))
    first, last = args.workers[0], args.workers[-1]
    if first != last:
        speedup = plans[first]["timing"]["wall_s"] / plans[last]["timing"]["wall_s"]
        print(f"speed-up {first} -> {last} workers: {speedup:.2f}x")
    same = len({tuple(designs(p)) for p in plans.values()}) == 1
    print(f"same designs with every worker count: {'yes' if same else 'NO'}")
    wall = plans[last]["timing"]["wall_s"]
    peak = max(max(p["timing"]["peak_rss_mb_per_worker"].values()) for p in plans.values())
    print(f"goal: wall with {last} workers {wall:.0f} s against {GOAL_WALL_S} s; "
          f"peak per worker {peak:.0f} MB against {GOAL_PEAK_MB} MB")  # fmt: skip
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
