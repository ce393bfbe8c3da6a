"""Faults under load on a timed plane: a lost relay, a lost MD, a blackholed WAN, kill -9.

Closed-loop streaming clients force the three pipelines in turn while an agent is killed or
the line is cut. A request that loses an agent resumes elsewhere (``gateway.run``), the probe
routes around a silent MD (``gateway.probe``), and ``pdd up``'s supervisor restarts what died.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from pdd_core.agent.supervisor.plane import DataPlane
from tests.system.conftest import ROOT, agents_up, start_plane, tracebacks
from tests.system.load import run_load

pytestmark = pytest.mark.system
TIMED = ROOT / "fixtures" / "dataplane" / "timed.json"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPlane]:
    plane = start_plane(
        tmp_path_factory.mktemp("faults"), TIMED, allow_route_override=True,
        routing={"handoff_chunk_tokens": 8, "extend_decode_min_tokens": 8},
    )  # fmt: skip
    said: list[str] = []
    plane.supervise(said.append)
    yield plane
    plane.stop()
    assert tracebacks(plane.run_dir) == []


def wan(plane: DataPlane, path: str, body: dict[str, str] | None = None) -> None:
    status, answer = plane.wan_request("POST", path, body or {})
    assert status == 200, answer


def wait_all_up(plane: DataPlane, timeout_s: float) -> float:
    """Seconds until the gateway reaches every agent again (raises after ``timeout_s``)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if all(agents_up(plane, timeout=2).values()):
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not every agent back in {timeout_s} s: {agents_up(plane, timeout=2)}")


def test_killing_the_relay_under_load_fails_under_one_percent(plane: DataPlane) -> None:
    wait_all_up(plane, 30)

    sent = run_load(
        plane, clients=6, duration_s=10, events={4.0: lambda: os.kill(pid(plane, "rld-0"), 9)}
    )

    failed = [s for s in sent if not s.result.ok]
    assert len(sent) >= 60
    assert len(failed) / len(sent) < 0.01, [s.result.error for s in failed]


def test_killing_one_md_fails_only_its_in_flight_requests(plane: DataPlane) -> None:
    wait_all_up(plane, 30)
    killed_at: list[float] = []

    def kill() -> None:
        killed_at.append(time.monotonic())
        os.kill(pid(plane, "md-1"), signal.SIGKILL)

    start = time.monotonic()
    sent = run_load(plane, clients=6, duration_s=10, events={4.0: kill})

    after = [s for s in sent if s.started > killed_at[0] - start]
    assert len(after) >= 20
    assert [s.result.error for s in after if not s.result.ok] == []
    assert len([s for s in sent if not s.result.ok]) <= 6  # at most the streams in flight


def test_a_blackholed_wan_is_detected_within_2_s_and_routed_around(plane: DataPlane) -> None:
    wait_all_up(plane, 30)
    cut_at: list[float] = []

    def cut() -> None:
        cut_at.append(time.time())
        wan(plane, "/cut", {"mode": "blackhole"})

    sent = run_load(
        plane, clients=6, duration_s=20,
        events={3.0: cut, 18.0: lambda: wan(plane, "/restore")},
    )  # fmt: skip

    failed = [s for s in sent if not s.result.ok]
    assert len(failed) / len(sent) < 0.05, [s.result.error for s in failed]
    log = (plane.run_dir / "gateway.log").read_text()
    # A log line: time, level, logger, message (run.LOG_FORMAT).
    stamps = re.findall(r"^(\S+ \S+) WARNING \S+ md-\d has not answered a probe", log, re.M)
    detected = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f").timestamp() for s in stamps]
    after_cut = [t - cut_at[0] for t in detected if t >= cut_at[0]]
    assert after_cut and min(after_cut) <= 2.0 + 0.5  # + the loaded box's timer slack


@pytest.mark.parametrize("agent", ["p-0", "rld-0", "md-0", "wan", "gateway"])
def test_kill_9_of_any_agent_is_back_within_5_s_by_itself(plane: DataPlane, agent: str) -> None:
    wait_all_up(plane, 30)
    before = pid(plane, agent)

    os.kill(before, signal.SIGKILL)
    time.sleep(0.2)
    back_in = wait_all_up(plane, 15) + 0.2

    assert pid(plane, agent) != before
    assert back_in <= 5.0
    if agent != "gateway":
        assert plane.restarts[agent] >= 1


def pid(plane: DataPlane, agent: str) -> int:
    return plane.pids()[agent]


def test_the_run_dir_holds_the_plane_secret_only_for_its_owner(plane: DataPlane) -> None:
    assert Path(plane.secret_path).stat().st_mode & 0o077 == 0
