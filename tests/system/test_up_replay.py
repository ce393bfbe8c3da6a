"""``pdd up`` then ``pdd replay`` on the Mooncake sample at native prompt sizes (6K-87K
tokens): no failure, all three pipelines, and Ctrl-C-equivalent SIGTERM leaves no child
behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.system
ROOT = Path(__file__).resolve().parents[2]


def test_up_then_replay_uses_every_pipeline_and_stops_cleanly(tmp_path: Path) -> None:
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdd_core",
            "up",
            str(ROOT / "fixtures/dataplane/timed.json"),
            "--run-dir",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        seen: dict[str, str] = {}
        deadline = time.monotonic() + 90
        assert up.stdout is not None
        while "pids" not in seen and time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            key, _, value = line.partition(": ")
            seen[key.strip()] = value.strip()
        assert "pids" in seen, seen
        pids = [int(p.split("=")[1]) for p in seen["pids"].split()]
        assert len(pids) == 7

        replay = subprocess.run(
            [
                sys.executable,
                "-m",
                "pdd_core",
                "replay",
                str(ROOT / "fixtures/traces/mooncake_conversation_sample.jsonl"),
                "--gateway",
                seen["gateway"],
                "--speed",
                "1",
                "--limit",
                "30",
                "--max-output",
                "64",
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PDD_API_KEY": seen["api key"]},  # not in argv: ps shows it
        )
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert "requests: 30  ok: 30  failed: 0" in replay.stdout
        mix = dict(re.findall(r"(P-[A-Z-]+)=(\d+)", replay.stdout))
        assert set(mix) == {"P-MD", "P-RLD-MD", "P-RLD"}, replay.stdout
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)

    assert up.returncode == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_ctrl_c_stops_every_child(tmp_path: Path) -> None:
    up = subprocess.Popen(
        [sys.executable, "-m", "pdd_core", "up", str(ROOT / "fixtures/dataplane/tiny.json"),
         "--run-dir", str(tmp_path / "run")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    pids: list[int] = []
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 90
        while not pids and time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            if line.startswith("pids: "):
                pids = [int(p.split("=")[1]) for p in line[6:].split()]
        assert len(pids) == 7
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=30)

    assert up.returncode == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
