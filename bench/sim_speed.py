"""Simulated requests per CPU-second, this simulator against the one before the engine models.

Runs a workload (by default the Mooncake conversation trace, ~12k requests, through the
``bench/sim_speed.toml`` topologies) under each policy twice, in fresh subprocesses on one core:
once with this tree's ``pdd_core`` and once with the simulator as it was at ``--baseline``
(default ``ff35434``, before paged KV, mixed iterations and the shared predictor), exported
with ``git archive`` into a temporary directory. It prints both side by side with the ratio,
plus this tree's requests per wall-second. The goal of issue #12 is a ratio of at least 1
(no loss of simulated requests per CPU-second while the engine models are added). Each side
runs ``--repeat`` times in one process and the best CPU time counts, because on a shared
machine a run's CPU time also grows with cache and memory-bus contention from other jobs.

    .venv/bin/python bench/sim_speed.py [--trace FILE] [--scenario FILE] [--policies ...]
        [--baseline COMMIT] [--max-requests N]

The baseline reads the same scenario file when it can; a file with keys the old code does not
know falls back to the baseline commit's own copy, and the table says so.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

# bench/ is on sys.path: the script's folder.
from worker import run_json

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"
# The default scenario: both simulators must read the same topology, and the reference scenario
# now uses shapes (tp x pp) and a time-shared RLD that the baseline cannot read. This file (a
# Qwen3-235B-A22B on H800 x 8 and H20 x 8) is valid under today's shape rules and readable by
# ff35434; tests/pdd_core/sim/test_golden.py holds this tree's results on it.
BENCH_SCENARIO = ROOT / "bench" / "sim_speed.toml"
POLICIES = ("colocated", "same-dc", "naive-cross-dc", "pdd")
# Issue #16's goal: simulated requests per CPU-second, every policy (and #12's: ratio >= 1).
GOAL_REQ_PER_CPU_S = 10_000

# Runs in a subprocess: load the scenario, run one policy, print CPU and wall seconds as JSON.
WORKER = """
import json, sys, time
from pdd_core.scenario import load_scenario
from pdd_core.sim import Policy, Simulator
path, trace, policy = sys.argv[1], sys.argv[2] or None, sys.argv[3]
limit, repeat = int(sys.argv[4]), int(sys.argv[5])
scenario = load_scenario(path, trace=trace)
requests = scenario.workload.requests()
if limit:
    requests = requests[:limit]
best_cpu = best_wall = float("inf")
for _ in range(repeat):
    cpu, wall = time.process_time(), time.perf_counter()
    result = scenario.run(policy, requests)
    best_cpu = min(best_cpu, time.process_time() - cpu)
    best_wall = min(best_wall, time.perf_counter() - wall)
# Events: one more (untimed) run through the Simulator class both versions have; its event
# counter is private, read here only to size the work per request.
sim = Simulator(scenario.topology_for(policy), Policy(policy), model_id=scenario.model_id,
                sla=scenario.sla, table=scenario.table, config=scenario.config)
sim.run(requests)
s = result.summary
print(json.dumps({"requests": len(requests), "cpu": best_cpu, "wall": best_wall,
                  "events": next(sim._seq), "served": s.served, "rejected": s.rejected}))
"""


def run_worker(
    pythonpath: Path, scenario: Path, trace: Path | None, policy: str, args: argparse.Namespace
) -> dict[str, float]:
    argv = [str(scenario), str(trace or ""), policy, str(args.max_requests), str(args.repeat)]
    return run_json(WORKER, argv, pythonpath)


def export_baseline(commit: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "pdd_core", "fixtures"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--scenario", type=Path, default=None, help="default: bench/sim_speed.toml")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--baseline", default="ff35434")
    parser.add_argument("--max-requests", type=int, default=0, help="0: the whole workload")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per policy and side; the best CPU time counts"
    )
    args = parser.parse_args()
    trace = args.trace if args.trace.exists() else None
    if trace is None:
        print(f"trace not found: {args.trace}; using the scenario's own workload")
    scenario = BENCH_SCENARIO if args.scenario is None else args.scenario.resolve()
    print(f"scenario {scenario.name}, workload {trace.name if trace else 'generator'}")
    compare(scenario, trace, args)
    return 0


def outcome(run: dict[str, float]) -> str:
    """A run's served and rejected requests: both trees must agree on them."""
    return f"{int(run['served'])}/{int(run['rejected'])}"


def verdict(ratio: float, rate: float) -> str:
    """``yes/no`` for issue #12's ratio goal, then for issue #16's rate goal."""
    return f"{'yes' if ratio >= 1 else 'no'}/{'yes' if rate >= GOAL_REQ_PER_CPU_S else 'no'}"


def compare(scenario: Path, trace: Path | None, args: argparse.Namespace) -> None:
    """Print the table: each policy with this tree and with the baseline commit."""
    print(
        f"{'policy':<16}{'requests':>9}{'base req/CPU-s':>16}{'now req/CPU-s':>15}"
        f"{'ratio':>7}{'now req/wall-s':>16}{'base ev/req':>12}{'now ev/req':>11}"
        f"{'base ev/CPU-s':>15}{'now ev/CPU-s':>14}{'ratio':>7}{'goal req/CPU-s':>16}{'met':>8}"
        f"{'served/rejected':>17}{'same':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp)
        export_baseline(args.baseline, base_dir)
        base_scenario = scenario
        notes = []
        for policy in args.policies:
            now = run_worker(ROOT, scenario, trace, policy, args)
            try:
                base = run_worker(base_dir, base_scenario, trace, policy, args)
            except RuntimeError as exc:
                if base_scenario != scenario:
                    raise
                if not scenario.is_relative_to(ROOT):
                    raise
                base_scenario = base_dir / scenario.relative_to(ROOT)
                notes.append(f"baseline read {args.baseline}'s copy of the scenario ({exc})")
                base = run_worker(base_dir, base_scenario, trace, policy, args)
            base_rate = base["requests"] / base["cpu"]
            now_rate = now["requests"] / now["cpu"]
            base_ev = base["events"] / base["cpu"]
            now_ev = now["events"] / now["cpu"]
            print(
                f"{policy:<16}{int(now['requests']):>9}{base_rate:>16.0f}{now_rate:>15.0f}"
                f"{now_rate / base_rate:>7.2f}{now['requests'] / now['wall']:>16.0f}"
                f"{base['events'] / base['requests']:>12.1f}"
                f"{now['events'] / now['requests']:>11.1f}"
                f"{base_ev:>15.0f}{now_ev:>14.0f}{now_ev / base_ev:>7.2f}"
                f"{GOAL_REQ_PER_CPU_S:>16}{verdict(now_rate / base_rate, now_rate):>8}"
                f"{outcome(now):>17}{'yes' if outcome(now) == outcome(base) else 'NO':>6}"
            )
        for note in notes:
            print(note)
    print(f"met: ratio >= 1 (issue #12) / now >= {GOAL_REQ_PER_CPU_S} req/CPU-s (issue #16)")
    print(
        f"baseline: {args.baseline} (git archive); ratios = now / base, goal >= 1 for "
        "req/CPU-s; ev/req = simulated events per request (the work the model asks for), "
        "ev/CPU-s = the cost of each; same: served and rejected equal in both trees"
    )


if __name__ == "__main__":
    sys.exit(main())
