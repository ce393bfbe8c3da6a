"""``bench/gpu_check.py --dry-run``: the GPU check's own code path, on the CPU with a tiny config.

It needs torch and transformers (the ``gpu-check`` extra, which ``.ci/run`` installs).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="install the gpu-check extra: pip install -e '.[gpu-check]'")
pytest.importorskip("transformers", reason="install the gpu-check extra")

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_measures_every_cell_beside_the_roofline(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["dry_run"] is True
    assert result["chip"] == "h100-sxm"
    assert result["skipped"] == []
    whats = [row["what"] for row in result["rows"]]
    assert whats == [
        "kv bytes/token",
        "prefill 32 tokens",
        "prefill 64 tokens",
        "decode step b=1 @ 64",
        "decode step b=4 @ 64",
        "extend 8 @ 64",
        "extend 8 @ 128",
        "kv export to host, ms/MiB",
        "kv import from host, ms/MiB",
    ]
    kv_row = result["rows"][0]
    # 2 (K, V) x 2 layers x 2 kv heads x 32 head_dim x 2 bytes (bf16), measured from the cache.
    assert kv_row["measured"] == 512
    assert kv_row["roofline"] == 512
    for row in result["rows"]:
        assert row["measured"] > 0
        assert row["roofline"] > 0
        assert row["ratio"] == pytest.approx(row["measured"] / row["roofline"])
    assert "prefill 32 tokens" in done.stdout


def test_detect_chip_maps_gpu_names_to_catalog_ids() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from pdd_core.specs import load_chips

    chips = load_chips()
    assert gpu_check.detect_chip("NVIDIA H200", chips).id == "h200"
    assert gpu_check.detect_chip("NVIDIA H100 80GB HBM3", chips).id == "h100-sxm"
    with pytest.raises(ValueError, match="no catalog chip matches 'Tesla T4'"):
        gpu_check.detect_chip("Tesla T4", chips)
    with pytest.raises(ValueError, match="no catalog chip matches 'NVIDIA H100 PCIe'"):
        gpu_check.detect_chip("NVIDIA H100 PCIe", chips)
