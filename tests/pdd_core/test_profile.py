"""Measured profiles replace the roofline for their (model, chip) at tp 1, and only there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pdd_core import perf, profile
from pdd_core.profile import MeasuredProfile, ProfileError, profile_from_dict
from pdd_core.sim.steps import StepModel
from pdd_core.specs import load_chips, load_models

MODEL, CHIP = "tiny-test", "h100-sxm"


def measured() -> MeasuredProfile:
    return MeasuredProfile(
        model=MODEL,
        chip=CHIP,
        prefill_tokens_per_s=1000.0,
        decode_step_s=((1, 0.010), (8, 0.024), (32, 0.072)),
        kv_bytes_per_token=268.0,
        export_s_per_mb=0.004,
        import_s_per_mb=0.003,
        prefill_tokens=512,
        decode_context=128,
        source="test",
    )


@pytest.fixture
def registered() -> Iterator[MeasuredProfile]:
    entry = measured()
    profile.register(entry)
    yield entry
    profile.unregister(MODEL, CHIP)


def test_a_registered_profile_times_prefill_and_decode(registered: MeasuredProfile) -> None:
    model, chip = load_models()[MODEL], load_chips()[CHIP]

    assert perf.prefill_time(model, chip, 500).seconds == pytest.approx(0.5)
    assert perf.prefill_time(model, chip, 100, batch=3).seconds == pytest.approx(0.3)
    assert perf.extend_time(model, chip, 20, 400).seconds == pytest.approx(0.02)
    assert perf.decode_step_time(model, chip, [100]).seconds == pytest.approx(0.010)
    assert perf.decode_step_time_uniform(model, chip, 4, 100).seconds == pytest.approx(0.016)
    assert perf.decode_step_time_uniform(model, chip, 20, 100).seconds == pytest.approx(0.048)
    assert perf.decode_step_time_uniform(model, chip, 56, 100).seconds == pytest.approx(0.120)
    assert perf.prefill_time(model, chip, 0).seconds == 0.0


def test_a_registered_profile_times_a_simulated_instance(registered: MeasuredProfile) -> None:
    """The simulator's instances time prefill past ``perf.prefill_time`` (straight to the
    roofline, ``sim.steps.StepModel``) only while no profile is registered for them."""
    model, chip = load_models()[MODEL], load_chips()[CHIP]
    steps = StepModel(model, chip, 1)
    assert steps.prefill_timing(500, 0).seconds == pytest.approx(0.5)
    assert steps.prefill_timing(500, 0) == perf.prefill_time(model, chip, 500, 0, 1)


def test_the_roofline_still_times_other_pairs_and_tp_above_one(
    registered: MeasuredProfile,
) -> None:
    model, chip = load_models()[MODEL], load_chips()[CHIP]
    other = load_chips()["h20"]
    profile.unregister(MODEL, CHIP)
    roof_tp2 = perf.prefill_time(model, chip, 500, tp=2)
    roof_other = perf.prefill_time(model, other, 500)
    profile.register(registered)

    assert perf.prefill_time(model, chip, 500, tp=2) == roof_tp2
    assert perf.prefill_time(model, other, 500) == roof_other
    assert perf.prefill_time(model, chip, 500).seconds != roof_tp2.seconds


def test_the_json_form_round_trips_and_bad_files_name_the_field(tmp_path: Path) -> None:
    raw = measured().to_dict()

    assert profile_from_dict(json.loads(json.dumps(raw))) == measured()
    with pytest.raises(ProfileError, match="format"):
        profile_from_dict({**raw, "format": "other/2"})
    with pytest.raises(ProfileError, match="prefill_tokens_per_s: required"):
        profile_from_dict({k: v for k, v in raw.items() if k != "prefill_tokens_per_s"})
    with pytest.raises(ProfileError, match="decode_step_s: batch sizes"):
        profile_from_dict({**raw, "decode_step_s": {"0": 0.1}})
    with pytest.raises(ProfileError, match="decode_step_s: times must be positive"):
        profile_from_dict({**raw, "decode_step_s": {"1": -0.1}})
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        profile.load(path)


def test_pdd_profiles_registers_files_for_every_process(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(measured().to_dict()))
    script = (
        "from pdd_core import perf\n"
        "from pdd_core.specs import load_chips, load_models\n"
        f"print(perf.prefill_time(load_models()['{MODEL}'], load_chips()['{CHIP}'], 250).seconds)"
    )
    env = dict(os.environ, PDD_PROFILES=str(path))
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )

    assert float(result.stdout) == pytest.approx(0.25)
