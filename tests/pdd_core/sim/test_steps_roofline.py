"""The simulator's prefill timing goes straight to ``roofline.Roofline`` (past ``perf``'s checks
and profile lookup); it must give exactly ``perf.prefill_time``'s figures (``test_profile``
holds that a measured profile still replaces the roofline for an instance)."""

from __future__ import annotations

import pytest

from pdd_core import perf
from pdd_core.roofline import roofline
from pdd_core.sim.steps import StepModel
from pdd_core.specs import InstanceShape, load_chips, load_models

SHAPES = (
    InstanceShape(tp=1),
    InstanceShape(tp=8),
    InstanceShape(tp=4, pp=2),
    InstanceShape(tp=2, dp=4, ep=8),
)
SIZES = ((1, 0, 1), (1, 9000, 1), (37, 120, 3), (4097, 1234, 2), (60_000, 70_000, 1))


@pytest.mark.parametrize("model_id", ["qwen3-235b-a22b", "deepseek-v3", "tiny-test"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.label)
def test_an_instance_times_prefill_exactly_as_perf_does(model_id: str, shape: InstanceShape):
    model, chip = load_models()[model_id], load_chips()["h800"]
    steps = StepModel(model, chip, shape, memo={})
    for new, cached, batch in SIZES:
        expected = perf.prefill_time(model, chip, new, cached, shape, batch=batch)
        assert steps.prefill_timing(new, cached, batch) == expected
        assert steps.prefill_timing(new, cached, batch) == expected  # memoised: the same
    assert steps.prefill_timing(0, 100) == perf.ZERO_TIMING


def test_rooflines_are_shared_per_spec_objects():
    model, chip = load_models()["tiny-test"], load_chips()["h800"]
    shape = InstanceShape(tp=2)
    assert roofline(model, chip, shape) is roofline(model, chip, shape)
    assert roofline(model, chip, shape) is not roofline(model, chip, InstanceShape(tp=1))
