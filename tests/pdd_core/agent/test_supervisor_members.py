"""A supervisor started again on a run directory stops the children an earlier one left
(``supervisor.members.stop_orphans``), and only those: a process that does not run this run's
file is left alone, whatever its pid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pdd_core.agent.supervisor.members import stop_orphans, terminate


def sleeper(*args: str) -> subprocess.Popen[bytes]:
    """A process that ignores SIGTERM (returned once it does) and names ``args``."""
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ignoring', flush=True); time.sleep(60)")  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"ignoring\n"
    return child


def test_leftover_children_of_this_run_are_stopped_and_others_are_not(tmp_path: Path) -> None:
    config = tmp_path / "dataplane.json"
    ours, other = sleeper("--config", str(config)), sleeper("--config", "elsewhere.json")
    pids = tmp_path / "children.json"
    pids.write_text(json.dumps({"p-0": ours.pid, "p-9": other.pid, "gone": 2**22 + 7}))
    try:
        stopped = stop_orphans(pids, config, grace_s=0.5)  # ours ignores SIGTERM: SIGKILL
        ours.wait(timeout=5)
        assert stopped == [ours.pid]
        assert ours.returncode == -9
        assert other.poll() is None
    finally:
        for child in (ours, other):
            child.kill()
            child.wait(timeout=5)
            assert child.stdout is not None
            child.stdout.close()


def test_no_record_of_children_stops_nothing(tmp_path: Path) -> None:
    assert stop_orphans(tmp_path / "children.json", tmp_path / "dataplane.json") == []


def test_terminate_kills_a_child_that_ignores_sigterm() -> None:
    child = sleeper()
    terminate(child, grace_s=0.2)
    assert child.stdout is not None
    child.stdout.close()

    assert child.returncode == -9
