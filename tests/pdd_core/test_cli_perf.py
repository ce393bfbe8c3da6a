"""``pdd perf``: the roofline table over catalog models and chips."""

from __future__ import annotations

import json

import pytest

from pdd_core import perf
from pdd_core.cli import main
from pdd_core.specs import CATALOG_DIR, InstanceShape, check_shape, load_chips, load_models

pytestmark = pytest.mark.skipif(
    not (CATALOG_DIR / "chips.json").exists() or not (CATALOG_DIR / "models.json").exists(),
    reason="fixtures/catalog/chips.json and models.json are not written yet",
)


def test_default_table_has_three_models_on_three_chips(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf"]) == 0

    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:-1]
    for column in ("prefill 4K", "prefill 32K", "decode b1@4K", "decode b32@4K", "decode b128@4K"):
        assert column in header
    assert len(rows) == 9
    # Every cell names its binding term, and by default every cell fits in KV memory.
    assert all(row.count(" ms ") == 5 for row in rows)
    assert not any("*" in row for row in rows)


def test_json_cells_are_the_perf_functions(capsys: pytest.CaptureFixture[str]) -> None:
    # The table is a view of pdd_core.perf, not a second model: cells equal direct calls.
    assert main(["perf", "--models", "deepseek-v3", "--chips", "h20", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    model, chip = load_models()["deepseek-v3"], load_chips()["h20"]
    tp = perf.min_shape(model, chip, kv_tokens=128 * 4097)

    assert row["shape"] == tp.to_dict()
    assert row["chips"] == tp.chips
    assert row["kv_capacity_tokens"] == perf.kv_rank_tokens(model, chip, tp)
    prefill = perf.prefill_time(model, chip, 32768, tp=tp)
    assert row["cells"]["prefill 32K"]["seconds"] == prefill.seconds
    assert row["cells"]["prefill 32K"]["bound"] == prefill.bound
    decode = perf.decode_step_time(model, chip, [4096] * 32, tp=tp)
    assert row["cells"]["decode b32@4K"]["seconds"] == pytest.approx(decode.seconds, rel=1e-12)


def test_forced_small_tp_marks_cells_that_do_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--models", "llama-3.1-70b", "--chips", "h100-sxm", "--tp", "2"]) == 0

    row = capsys.readouterr().out.splitlines()[1]
    # 2 x 80 GiB holds the 141 GB of weights but nowhere near 128 x 4K tokens of 320 KB.
    assert row.rstrip().endswith("*")


def test_unknown_id_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--models", "gpt-7"]) == 2
    assert "unknown model 'gpt-7'" in capsys.readouterr().err


def test_an_invalid_shape_is_refused_with_its_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--models", "ref-1t-mla", "--chips", "gpu-a", "--tp", "16"]) == 2
    assert "rule tp-within-scaleup-domain" in capsys.readouterr().err


def test_default_shapes_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    models, chips = load_models(), load_chips()
    for row in rows:
        shape = InstanceShape(**row["shape"])
        check_shape(models[row["model"]], chips[row["chip"]], shape)
