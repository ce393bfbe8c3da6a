"""An instance's iteration times are ``perf``'s, memoised exactly (``pdd_core.sim.steps``)."""

from __future__ import annotations

from pdd_core import perf, profile
from pdd_core.sim.steps import StepModel, prefill_memo
from pdd_core.specs import load_chips, load_models
from tests.pdd_core.test_profile import CHIP, MODEL, measured


def test_prefill_and_extend_times_are_perfs_and_shared_between_instances() -> None:
    model, chip = load_models()[MODEL], load_chips()[CHIP]
    first, second = StepModel(model, chip, 2), StepModel(model, chip, 2)

    assert first.prefill_timing(700, 300, 2) == perf.prefill_time(model, chip, 700, 300, 2, batch=2)
    assert first.extend_s(16, 5000) == perf.extend_time(model, chip, 16, 5000, 2).seconds
    # The second instance reads the first one's figures: one memo per (model, chip, shape).
    assert second._prefill_memo is first._prefill_memo
    assert (16, 5000, 1) in second._prefill_memo
    assert prefill_memo(model, chip, 4) is not first._prefill_memo


def test_a_profile_registered_between_runs_times_the_next_run() -> None:
    model, chip = load_models()[MODEL], load_chips()[CHIP]
    roofline = StepModel(model, chip, 1).prefill_s(500, 0)  # memoised in the shared memo
    profile.register(measured())
    try:
        timed = StepModel(model, chip, 1)
        assert timed.prefill_s(500, 0) == perf.prefill_time(model, chip, 500).seconds
        assert timed.extend_s(20, 400) == perf.extend_time(model, chip, 20, 400).seconds
    finally:
        profile.unregister(MODEL, CHIP)
    assert timed.prefill_s(500, 0) != roofline
    assert StepModel(model, chip, 1).prefill_s(500, 0) == roofline
