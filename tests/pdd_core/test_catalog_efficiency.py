"""Efficiencies from measured kernels (issue #25 item 7): a chip entry's ``measured`` kernels
bound its catalog efficiencies, so no chip is modelled faster than a published measurement."""

from __future__ import annotations

import pytest

from pdd_core.specs import chip_from_dict, load_chip_entries, load_chips

ENTRIES = {raw["id"]: raw for raw in load_chip_entries()}


def test_no_loaded_chip_beats_its_measured_kernels() -> None:
    chips = load_chips()
    for chip_id, raw in ENTRIES.items():
        measured = raw.get("measured")
        if measured is None:
            continue
        chip = chips[chip_id]
        assert measured["source"]
        for key in ("gemm_bf16_tflops", "attention_bf16_tflops"):
            if key in measured:
                assert chip.compute_efficiency * chip.bf16_tflops <= measured[key] + 1e-9
        if "hbm_tbps" in measured:
            assert chip.memory_efficiency * chip.hbm_tbps <= measured["hbm_tbps"] + 1e-9


def test_a_catalog_figure_above_the_measurement_takes_the_measured_one() -> None:
    # Hopper: FlashAttention-3's 740 of 989.4 BF16 TFLOP/s is the lowest measured kernel.
    assert load_chips()["h100-sxm"].compute_efficiency == pytest.approx(740.0 / 989.4)
    raw = {**ENTRIES["mi300x"], "compute_efficiency": 0.9, "memory_efficiency": 0.99}
    raw["measured"] = {**raw["measured"], "hbm_tbps": 4.0}
    chip = chip_from_dict(raw)
    assert chip.compute_efficiency == pytest.approx(668.4 / 1307.4)
    assert chip.memory_efficiency == pytest.approx(4.0 / 5.3)


def test_a_catalog_figure_below_the_measurement_is_kept() -> None:
    raw = {**ENTRIES["a100-80g"]}
    assert chip_from_dict(raw).compute_efficiency == raw["compute_efficiency"] == 0.72


@pytest.mark.parametrize(
    ("measured", "message"),
    [
        ({"gemm_bf16_tflops": 700.0}, "with its source"),
        ({"gemm_bf16_tflops": 0.0, "source": "x"}, "must be positive"),
        ({"gflops": 1.0, "source": "x"}, "unknown measured keys"),
    ],
)
def test_bad_measurements_are_named(measured: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        chip_from_dict({**ENTRIES["h100-sxm"], "measured": measured})
