"""bench_llamacpp runs end to end on a small model: its table, and a profile perf then uses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.llamacpp_support import require_llama_cpp

require_llama_cpp()

from pdd_core.profile import profile_from_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_prints_its_table_and_writes_a_loadable_profile(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_llamacpp.py"),
            "--layers", "1", "--dim", "64", "--prefill-tokens", "32", "--context", "16",
            "--steps", "1", "--profile-out", str(out), "--model-id", "tiny-test",
            "--chip-id", "h20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )  # fmt: skip

    for row in ("prefill tokens/s", "decode tokens/s, batch 32", "KV bytes per token"):
        assert row in result.stdout
    assert "ship KV s" in result.stdout
    profile = profile_from_dict(json.loads(out.read_text()))
    assert (profile.model, profile.chip) == ("tiny-test", "h20")
    assert [batch for batch, _ in profile.decode_step_s] == [1, 8, 32]
    assert profile.kv_bytes_per_token == 12 + 2 * 1 * 1 * 64 * 2  # one layer, one KV head of 64
