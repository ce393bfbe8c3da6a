"""``pdd up`` then ``pdd replay`` on the Mooncake sample at native prompt sizes (6K-87K
tokens): no failure, all three pipelines, and Ctrl-C-equivalent SIGTERM leaves no child
behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import pdd_command, up_banner

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
        seen = up_banner(up, timeout_s=90)
        assert "pids" in seen, seen
        pids = [int(p.split("=")[1]) for p in seen["pids"].split()]
        assert len(pids) == 7

        # Twice the trace's speed: its bursts then keep two or more KV transfers on the line
        # when the cold 16K-27K-token prompts arrive, so some are relayed in every run (the
        # gateway counts a transfer from the end of its prefill until it lands, as the
        # simulator does; at speed 1 a run now and then relays none: docs/dataplane.md).
        command = pdd_command(
            "replay", str(ROOT / "fixtures/traces/mooncake_conversation_sample.jsonl"),
            "--gateway", seen["gateway"], "--speed", "2", "--limit", "30",
            "--max-output", "64",
        )  # fmt: skip
        replay = subprocess.run(
            command,
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

    assert_stopped_cleanly(up, pids)


def test_ctrl_c_stops_every_child_and_pdd_up_prints_no_secret(tmp_path: Path) -> None:
    run = tmp_path / "run"
    up = subprocess.Popen(
        [sys.executable, "-m", "pdd_core", "up", str(ROOT / "fixtures/dataplane/tiny.json"),
         "--run-dir", str(run)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    pids: list[int] = []
    try:
        seen = up_banner(up, timeout_s=90)
        pids = [int(p.split("=")[1]) for p in seen.get("pids", "").split()]
        assert len(pids) == 7
    finally:
        up.send_signal(signal.SIGINT)
        output, _ = up.communicate(timeout=30)

    assert_stopped_cleanly(up, pids)
    # The WAN line's control token and the plane's secret are fresh per plane, 0600, and
    # printed nowhere: the banner names the token's file, not the token.
    printed = "\n".join(f"{k}: {v}" for k, v in seen.items()) + output
    for name in ("wan.token", "plane.secret"):
        secret = (run / name).read_text().strip()
        assert len(secret) == 64 and secret not in printed, name
        assert (run / name).stat().st_mode & 0o777 == 0o600
    assert seen["wan control"].endswith(f"(bearer token in {run / 'wan.token'})")


def assert_stopped_cleanly(up: subprocess.Popen[str], pids: list[int]) -> None:
    """``pdd up`` exited 0 and none of its children is left."""
    assert up.returncode == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
