"""The analytic screen of instance shapes (``planner.screen``): which P shapes get sized.

P shapes are ranked by the chips of the smallest pool of each that meets the TTFT targets on
its own. On the full Mooncake trace (3.4 req/s of 37%-hit conversation on H800), one tp4xpp6
instance (24 chips) carries what takes two tp4xpp4 or tp2xpp8 instances (32): the screen that
ranked by latency x chips dropped it, and with it the cheapest same-dc design (issue 25).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pdd_core.planner import PlannerInputs, inputs_from_scenario, prepare
from pdd_core.planner.capacity import MAX_UTILISATION, Evaluator, gg_wait
from pdd_core.planner.screen import prefill_pool, shape_options
from pdd_core.scenario import load_scenario
from pdd_core.specs import InstanceShape, Role

SCENARIOS = Path(__file__).resolve().parents[3] / "fixtures" / "scenarios"


@pytest.fixture(scope="module")
def mooncake() -> tuple[PlannerInputs, Evaluator]:
    inputs = inputs_from_scenario(load_scenario(SCENARIOS / "mooncake_conversation.toml"))
    return inputs, prepare(inputs).evaluator


def _meets_alone(ev: Evaluator, inputs: PlannerInputs, shape: InstanceShape, n: int) -> bool:
    """The definition, spelled out: n instances' prefills plus their queue meet both targets."""
    occupied = ev.prefill_occupancy("h800", shape)
    rate = ev.profile.rate_rps
    if rate * float(occupied.mean()) / n >= MAX_UTILISATION:
        return False
    wait = gg_wait(n, rate, occupied, ev.profile.arrival_cv2).draw(*ev.draws(0))
    p90, p99 = np.percentile(ev.prefill_service("h800", shape) + wait, [90, 99])
    return bool(p90 <= inputs.sla.ttft_p90_s and p99 <= inputs.sla.ttft_p99_s)


def test_one_deep_pipeline_instance_outranks_two_shallow_ones(
    mooncake: tuple[PlannerInputs, Evaluator],
) -> None:
    inputs, ev = mooncake
    limit = inputs.limit_for("h800")
    deep, shallow = InstanceShape(tp=4, pp=6), InstanceShape(tp=4, pp=4)
    assert prefill_pool(ev, inputs.sla, "h800", deep, limit)[0] == 24
    assert prefill_pool(ev, inputs.sla, "h800", shallow, limit)[0] == 32
    kept = shape_options(ev, inputs, "h800", Role.PREFILL)
    assert kept[0] == deep


@pytest.mark.parametrize("tp,pp", [(2, 8), (4, 4), (4, 6), (8, 2), (8, 4)])
def test_the_pool_is_the_smallest_that_meets_the_ttft_targets(
    mooncake: tuple[PlannerInputs, Evaluator], tp: int, pp: int
) -> None:
    inputs, ev = mooncake
    shape = InstanceShape(tp=tp, pp=pp)
    chips, _ = prefill_pool(ev, inputs.sla, "h800", shape, inputs.limit_for("h800"))
    assert math.isfinite(chips)
    n = int(chips) // shape.chips
    assert _meets_alone(ev, inputs, shape, n)
    assert n == 1 or not _meets_alone(ev, inputs, shape, n - 1)


def test_a_shape_no_pool_can_serve_ranks_last_with_its_best_p90(
    mooncake: tuple[PlannerInputs, Evaluator],
) -> None:
    inputs, ev = mooncake
    strict = replace(inputs.sla, ttft_p90_s=0.05, ttft_p99_s=0.05)
    chips, p90 = prefill_pool(ev, strict, "h800", InstanceShape(tp=8, pp=8), 64)
    assert chips == math.inf
    assert p90 >= float(np.percentile(ev.prefill_service("h800", InstanceShape(tp=8, pp=8)), 90))
