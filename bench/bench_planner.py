"""Where the planner's time goes, and how far the analytic model is from the simulator.

Prints, for one scenario (default: the reference), side by side in one run: the time of each
phase (profile, analytic search, one simulator verification, the whole plan), analytic design
evaluations per second against simulator runs per second (the ratio is why the search is
analytic and only the best few are simulated), and for the chosen design the analytic
prediction beside the simulator's figures (the model's error, reported, not corrected).

Run: ``.venv/bin/python bench/bench_planner.py [SCENARIO]``; ``taskset -c 0`` pins one core.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pdd_core.planner import inputs_from_scenario, make_plan, prepare, verify  # noqa: E402
from pdd_core.planner.design import design_from_dict  # noqa: E402
from pdd_core.planner.result import Plan  # noqa: E402
from pdd_core.planner.stages import evaluate  # noqa: E402
from pdd_core.scenario import load_scenario  # noqa: E402


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "fixtures/scenarios/pdd_reference.toml")
    started = time.perf_counter()
    scenario = load_scenario(path)
    inputs = inputs_from_scenario(scenario)
    loaded = time.perf_counter() - started

    started = time.perf_counter()
    prepared = prepare(inputs)
    search_s = time.perf_counter() - started

    design = prepared.found.pdd[0].design
    evaluator = prepared.evaluator
    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < 1.0:
        evaluate(evaluator, design)
        count += 1
    evals_per_s = count / (time.perf_counter() - started)

    started = time.perf_counter()
    verify(inputs, design)
    sim_s = time.perf_counter() - started

    started, cpu_started = time.perf_counter(), time.process_time()
    plan = make_plan(inputs)
    plan_s = time.perf_counter() - started
    plan_cpu_s = time.process_time() - cpu_started

    print(f"scenario {scenario.name}: {len(inputs.requests)} requests")
    print(f"{'phase':<40}{'seconds':>10}")
    print(f"{'load scenario + build inputs':<40}{loaded:>10.2f}")
    print(f"{'profile + analytic search':<40}{search_s:>10.2f}")
    print(f"{'  designs sized':<40}{prepared.found.evaluated:>10}")
    print(f"{'one simulator verification':<40}{sim_s:>10.2f}")
    print(f"{'whole plan (make_plan)':<40}{plan_s:>10.2f}")
    print(f"{'  of which CPU (goal <= 30 s)':<40}{plan_cpu_s:>10.2f}")
    print()
    print(f"analytic evaluations/s {evals_per_s:,.0f}; simulator runs/s {1 / sim_s:.3f}; "
          f"ratio {evals_per_s * sim_s:,.0f}x")  # fmt: skip
    if not isinstance(plan, Plan):
        print("infeasible:", plan.explanation)
        return
    print()
    data = plan.to_dict()
    pools = {p["role"]: p for p in data["pools"]}
    prefill = pools["P"]
    decode = pools.get("MD", {**prefill, "role": "MD", "instances": 0})
    chosen = design_from_dict(
        {
            "policy": data["policy"],
            "prefill": prefill,
            "relay": pools.get("RLD"),
            "decode": decode,
            "table": data["routing_table"],
            "rld_mode": data["rld_mode"] or "pool",
        }
    )
    analytic = evaluate(evaluator, chosen)
    simulated = plan.predicted
    print(f"{'chosen design':<22}{'analytic':>12}{'simulator':>12}{'ratio':>8}")
    for key, label, scale in (
        ("p50", "TTFT P50 (s)", 1.0),
        ("p90", "TTFT P90 (s)", 1.0),
        ("p99", "TTFT P99 (s)", 1.0),
    ):
        a, s = analytic.ttft[key] * scale, simulated[f"ttft_{key}"] * scale
        print(f"{label:<22}{a:>12.3f}{s:>12.3f}{a / s:>8.2f}")
    for key, label in (("p50", "TPOT P50 (ms)"), ("p99", "TPOT P99 (ms)")):
        a, s = analytic.tpot[key] * 1e3, simulated[f"tpot_{key}"] * 1e3
        print(f"{label:<22}{a:>12.2f}{s:>12.2f}{a / s:>8.2f}")
    a, s = analytic.goodput_rps, simulated["goodput_rps"]
    print(f"{'goodput (req/s)':<22}{a:>12.3f}{s:>12.3f}{a / s:>8.2f}")


if __name__ == "__main__":
    main()
