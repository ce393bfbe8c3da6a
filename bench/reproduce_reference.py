"""Print the reference scenario's comparison table, each figure beside its goal (issue 12).

Runs, on ``fixtures/scenarios/pdd_reference.toml`` (DOMAIN.md section 8's regime):

1. ``pdd plan``: the planner's recommended PDD design against the best homogeneous design at the
   same SLA (both verified in the simulator), with the planner's CPU and wall time;
2. ``pdd compare``'s capacity search: each policy's capacity goodput (the highest session-scaled
   rate at which the SLA holds, rejections counted as misses) and BCR (that over $/h), on the
   scenario's own pools;

and prints one table: measured figure, goal, met or not. A goal not met is printed as such,
with the binding constraint the plan names; nothing here changes an input to reach a goal.

    .venv/bin/python bench/reproduce_reference.py [--scenario FILE] [--iterations N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdd_core.cli.simulate import compare_scenario  # noqa: E402
from pdd_core.planner import Plan, inputs_from_scenario, make_plan  # noqa: E402
from pdd_core.scenario import load_scenario  # noqa: E402

DEFAULT_SCENARIO = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"

# The "Done when" goals.
GOAL_PLAN_CHEAPER = 0.03
GOAL_CAPACITY_ABOVE = 0.15
GOAL_BCR_ABOVE = 0.20
GOAL_PLANNER_CPU_S = 30.0


def plan_figures(path: Path) -> dict[str, Any]:
    """Plan the scenario once; the PDD design's cost against the best homogeneous one."""
    scenario = load_scenario(path)
    inputs = inputs_from_scenario(scenario)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    outcome = make_plan(inputs)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    figures: dict[str, Any] = {"planner_cpu_s": cpu, "planner_wall_s": wall}
    if not isinstance(outcome, Plan):
        figures["infeasible"] = outcome.explanation
        return figures
    verdict = outcome.reasons["verdict"]
    rows = {row["policy"]: row for row in verdict["designs"]}
    figures.update(
        recommended=outcome.policy,
        verdict=verdict["sentence"],
        versus_aggregated=verdict.get("versus_aggregated", ""),
        binding=outcome.reasons["summary"],
        designs=rows,
    )
    return figures


def compare_figures(path: Path, iterations: int) -> dict[str, Any]:
    """Capacity goodput and BCR of every policy on the scenario's own pools."""
    ran = compare_scenario(str(path), progress=False, capacity=True, capacity_iterations=iterations)
    return {
        policy: {
            "goodput_rps": cap.goodput_rps,
            "bcr": cap.bcr,
            "cost_per_hour": cap.cost_per_hour,
            "bound": cap.bound,
        }
        for policy, cap in ran["capacity"].items()
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b - 1.0


def table(plan: dict[str, Any], capacity: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Rows of (figure, measured, goal, met)."""
    rows: list[tuple[str, str, str, str]] = []
    designs = plan.get("designs", {})
    pdd = designs.get("pdd")
    homogeneous = [d for p, d in designs.items() if p != "pdd"]
    best_other = min(homogeneous, key=lambda d: d["cost_per_hour"], default=None)
    if pdd is not None and best_other is not None:
        saving = 1.0 - pdd["cost_per_hour"] / best_other["cost_per_hour"]
        rows.append(
            (
                f"plan: PDD ${pdd['cost_per_hour']:.1f}/h vs best {best_other['policy']} "
                f"${best_other['cost_per_hour']:.1f}/h",
                f"{saving:+.1%} cheaper",
                f">= {GOAL_PLAN_CHEAPER:.0%} cheaper",
                "yes" if saving >= GOAL_PLAN_CHEAPER else "NO",
            )
        )
    else:
        rows.append(("plan: PDD vs best homogeneous", "no PDD design confirmed", ">= 3%", "NO"))
    mine, theirs = capacity.get("pdd"), capacity.get("same-dc")
    if mine is not None and theirs is not None:
        for key, label, goal in (
            ("goodput_rps", "capacity goodput", GOAL_CAPACITY_ABOVE),
            ("bcr", "BCR (capacity / $/h)", GOAL_BCR_ABOVE),
        ):
            ratio = _ratio(mine[key], theirs[key])
            scale = 3600.0 if key == "bcr" else 1.0
            unit = "req/h per $/h" if key == "bcr" else "req/s"
            rows.append(
                (
                    f"compare: PDD {label} {mine[key] * scale:.3f} vs same-dc "
                    f"{theirs[key] * scale:.3f} {unit}",
                    "-" if ratio is None else f"{ratio:+.1%}",
                    f">= +{goal:.0%}",
                    "yes" if ratio is not None and ratio >= goal else "NO",
                )
            )
    cpu = plan["planner_cpu_s"]
    rows.append(
        (
            f"planner CPU (wall {plan['planner_wall_s']:.1f} s)",
            f"{cpu:.1f} s",
            f"<= {GOAL_PLANNER_CPU_S:.0f} s",
            "yes" if cpu <= GOAL_PLANNER_CPU_S else "NO",
        )
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    parser.add_argument("--iterations", type=int, default=3, help="capacity bisection steps")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    plan = plan_figures(args.scenario)
    capacity = compare_figures(args.scenario, args.iterations)
    rows = table(plan, capacity)
    if args.json:
        print(json.dumps({"plan": plan, "capacity": capacity, "table": rows}, indent=2))
        return 0
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'measured':>16}  {'goal':>14}  met")
    for figure, measured, goal, met in rows:
        print(f"{figure:<{width}}  {measured:>16}  {goal:>14}  {met}")
    print()
    if "infeasible" in plan:
        print(f"planner: no plan - {plan['infeasible']}")
    else:
        print(f"planner recommends {plan['recommended']}: {plan['verdict']}")
        print(f"versus aggregated: {plan['versus_aggregated']}")
        print(f"what binds: {plan['binding']}")
    print()
    print(f"{'policy':<16}{'capacity req/s':>15}{'$/h':>9}{'BCR req/h per $/h':>19}  bound")
    for policy, row in capacity.items():
        print(
            f"{policy:<16}{row['goodput_rps']:>15.3f}{row['cost_per_hour']:>9.1f}"
            f"{row['bcr'] * 3600:>19.3f}  {row['bound'] or '-'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
