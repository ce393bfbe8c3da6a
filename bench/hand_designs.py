"""Try hand-made designs against the planner's best of each family (issue 25).

For a scenario, ``make_plan`` gives each family's cheapest confirmed design. This bench then
makes designs by hand around and away from it, more than 3% cheaper, and runs each in the
project's own simulator on the same scenario, load and SLA (``planner.verify.verify``, the
planner's own judge: every SLA percentile met, at most 1% rejected):

- re-splits of fewer chips between the roles, and one node less on either side;
- every other valid shape per role (not only the shapes the planner's analytic screen kept),
  with the counts that bring it just under the target cost;
- the other RLD mode and every transfer budget for PDD, every chunk budget for aggregated;
- for a family where the planner confirmed nothing, designs up to the cheapest other family.

It prints each family's planner design, how many hand designs were simulated, and every hand
design that met the SLA for more than 3% less (the planner was beaten), or "none".

    taskset -c 0 .venv/bin/python bench/hand_designs.py [--scenario FILE] [--per-family N]
        [--price CHIP=USD_PER_HOUR]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdd_core.planner import Plan, PlannerInputs, inputs_from_scenario, make_plan  # noqa: E402
from pdd_core.planner.design import (  # noqa: E402
    COLOCATED,
    FAMILIES,
    PDD,
    Design,
    design_from_dict,
)
from pdd_core.planner.improve import confirmed  # noqa: E402
from pdd_core.planner.skeletons import choice  # noqa: E402
from pdd_core.planner.verify import verify  # noqa: E402
from pdd_core.scenario import load_scenario  # noqa: E402
from pdd_core.specs import InstanceShape, RldMode, Role, valid_shapes  # noqa: E402

DEFAULT_SCENARIO = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"
MARGIN = 0.03  # a hand design beats the planner when it is more than 3% cheaper


def shapes(inputs: PlannerInputs, chip: str) -> list[InstanceShape]:
    """Every valid shape of the model on ``chip`` that packs whole nodes (dp 1)."""
    spec = inputs.chips[chip]
    node = spec.chips_per_node
    return [
        s
        for s in valid_shapes(inputs.model, spec, max_chips=inputs.limit_for(chip))
        if s.dp == 1 and (s.chips % node == 0 or node % s.chips == 0)
    ]


def _counts(target: float, unit: float, floor: int = 1) -> range:
    top = max(floor, math.floor(target / unit)) if unit > 0 else floor
    return range(floor, top + 1)


def disaggregated(inputs: PlannerInputs, best: Design, target: float) -> list[Design]:
    """P and D shapes x counts of ``best``'s chips and sites costing at most ``target``."""
    chips = inputs.chips
    made: list[Design] = []
    relay_options: list[tuple[Any, RldMode]] = [(best.relay, best.rld_mode)]
    if best.policy == PDD:
        other = RldMode.POOL if best.rld_mode is RldMode.SHARED else RldMode.SHARED
        relay = best.relay or choice(
            best.prefill.site, best.prefill.chip, Role.RELAY_DECODE, best.prefill.shape
        )
        relay_options.append((relay if other is RldMode.POOL else None, other))
    p_shapes, d_shapes = shapes(inputs, best.prefill.chip), shapes(inputs, best.decode.chip)
    for p_shape, d_shape, (relay, mode) in itertools.product(p_shapes, d_shapes, relay_options):
        p_unit = choice("x", best.prefill.chip, Role.PREFILL, p_shape).cost(chips)
        d_unit = choice("x", best.decode.chip, Role.MAIN_DECODE, d_shape).cost(chips)
        relay_cost = relay.cost(chips) if relay is not None else 0.0
        for n_p in _counts(target - d_unit - relay_cost, p_unit):
            left = target - relay_cost - n_p * p_unit
            for n_d in _counts(left, d_unit):
                design = Design(
                    best.policy,
                    replace(best.prefill, instances=n_p, tp=p_shape.tp, pp=p_shape.pp),
                    replace(best.decode, instances=n_d, tp=d_shape.tp, pp=d_shape.pp),
                    relay,
                    best.table,
                    mode,
                )
                if design.cost(chips) <= target and inputs.over_limit(design) is None:
                    made.append(design)
    return made


def aggregated(inputs: PlannerInputs, best: Design, target: float) -> list[Design]:
    """Every shape x chunk budget x count of ``best``'s chip costing at most ``target``."""
    made = []
    for shape in shapes(inputs, best.prefill.chip):
        unit = choice("x", best.prefill.chip, Role.PREFILL, shape).cost(inputs.chips)
        for chunk in (512, 1024, 2048, 4096, 8192, 16384):
            for n in _counts(target, unit):
                design = replace(
                    best,
                    prefill=replace(
                        best.prefill, instances=n, tp=shape.tp, pp=shape.pp, chunk_tokens=chunk
                    ),
                    decode=replace(best.decode, tp=shape.tp, pp=shape.pp),
                )
                # _counts gives one instance even where one costs more than the target.
                if design.cost(inputs.chips) <= target and inputs.over_limit(design) is None:
                    made.append(design)
    return made


def order(designs: list[Design], best: Design, inputs: PlannerInputs) -> list[Design]:
    """Nearest first: same shapes, then one shape changed, then both; dearest (closest to the
    planner's cost) first within each, so the budget goes where a beat is likeliest."""

    def changed(d: Design) -> int:
        return sum(
            (a.tp, a.pp) != (b.tp, b.pp)
            for a, b in ((d.prefill, best.prefill), (d.decode, best.decode))
        )

    unique = list(dict.fromkeys(designs))
    return sorted(unique, key=lambda d: (changed(d), -d.cost(inputs.chips), d.label()))


def try_family(
    inputs: PlannerInputs, family: str, row: dict[str, Any], fallback: float, per_family: int
) -> tuple[str, int, list[str]]:
    """(planner's design, hand designs simulated, the ones that beat it)."""
    chips = inputs.chips
    if row["found"]:
        bases = [design_from_dict(row["spec"])]
        best = bases[0]
        target = best.cost(chips) * (1 - MARGIN) - 1e-9
        label = f"{best.label()} ${best.cost(chips):.1f}/h"
    else:
        # Nothing confirmed: any hand design that meets the SLA below the cheapest other
        # family's cost beats the planner; start from each chip pairing the planner simulated.
        simulated = [design_from_dict(r["spec"]) for r in row.get("simulated") or []]
        if not simulated or not math.isfinite(fallback):
            return "family does not apply", 0, []
        seen: dict[tuple[str, str], Design] = {}
        for d in simulated:
            seen.setdefault((d.prefill.chip, d.decode.chip), d)
        bases = list(seen.values())
        best, target = bases[0], fallback
        label = f"none confirmed in {len(simulated)} simulations; trying up to ${fallback:.1f}/h"
    made = []
    for base in bases:
        made += (
            aggregated(inputs, base, target)
            if family == COLOCATED
            else disaggregated(inputs, base, target)
        )
    beats = []
    tried = 0
    for design in order(made, best, inputs)[:per_family]:
        tried += 1
        run = verify(inputs, design)
        if confirmed(run):
            beats.append(f"{design.label()} ${design.cost(chips):.1f}/h")
    return label, tried, beats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    parser.add_argument("--per-family", type=int, default=30)
    parser.add_argument("--price", action="append", default=[], help="CHIP=USD per chip-hour")
    args = parser.parse_args()
    inputs = inputs_from_scenario(load_scenario(args.scenario))
    chips = dict(inputs.chips)
    for item in args.price:
        chip, _, usd = item.partition("=")
        chips[chip] = replace(chips[chip], price_per_hour=float(usd))
    inputs = replace(inputs, chips=chips, settings=replace(inputs.settings, capacity_seeds=0))
    cpu = time.process_time()
    plan = make_plan(inputs)
    print(f"{args.scenario.name}: planner CPU {time.process_time() - cpu:.1f} s")
    if not isinstance(plan, Plan):
        print(f"no plan: {plan.explanation}")
        return 1
    rows = {r["policy"]: r for r in plan.reasons["verdict"]["families"]}
    costs = [r["cost_per_hour"] for r in rows.values() if r["found"]]
    fallback = min(costs) if costs else math.inf
    beaten = 0
    for family in FAMILIES:
        label, tried, beats = try_family(inputs, family, rows[family], fallback, args.per_family)
        print(f"{family:<16} planner: {label}; hand designs simulated: {tried}")
        for beat in beats:
            print(f"    BEATS THE PLANNER by > {MARGIN:.0%}: {beat}")
        beaten += len(beats)
        if tried and not beats:
            print("    none beats it")
    print(f"verdict: {plan.reasons['verdict']['sentence']}")
    return 1 if beaten else 0


if __name__ == "__main__":
    sys.exit(main())
