"""bench_md_throughput runs against a main-decode agent started as the plane ships it (its
plane secret and TLS material in the environment): every token of every stream comes back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_streams_every_token_through_an_authenticated_md_agent() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_md_throughput.py"), "--batch", "2",
         "--tokens", "8", "--engines", "timed", "tiny"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split() for line in result.stdout.splitlines()[1:] if line.strip()]
    assert [(r[0], r[1], r[2]) for r in rows] == [("timed", "2", "8"), ("tiny", "2", "8")]
    # engine alone and through the agent: both measured (the agent returned every stream)
    assert all(float(r[3]) > 0 and float(r[4]) > 0 for r in rows)
