"""Data planes of real processes on loopback for the system tests, and a small HTTP client.

Each fixture starts a whole plane (gateway, two P, one RLD, two MD, the WAN emulator) with
``pdd_core.agent.supervisor.plane`` from a fixture topology, waits (bounded) until the gateway
reaches every agent, and stops every child afterwards.

No agent may log a traceback during the system tests: every plane's logs (a session plane's at
its teardown, a test's own ``tmp_path`` planes after the test) are scanned, and a traceback
fails the test that produced it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.supervisor.plane import DataPlane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "fixtures" / "dataplane" / "tiny.json"
TRACEBACK_MARKS = ("Traceback (most recent call last)", "handler failed")


def tracebacks(root: Path) -> list[str]:
    """Every agent-log line under ``root`` that starts a traceback, as ``file: line``."""
    found = []
    for log in sorted(root.rglob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if any(mark in line for mark in TRACEBACK_MARKS):
                found.append(f"{log.name}: {line.strip()}")
    return found


@pytest.fixture(autouse=True)
def no_traceback_in_agent_logs(tmp_path: Path) -> Iterator[None]:
    """Fails a test whose own planes (under its ``tmp_path``) logged a traceback."""
    yield
    assert tracebacks(tmp_path) == []


def start_plane(tmp: Path, topology: Path, **changes: Any) -> DataPlane:
    raw = json.loads(topology.read_text())
    for section, values in changes.items():
        if isinstance(values, dict):
            raw.setdefault(section, {}).update(values)
        else:
            raw[section] = values
    path = tmp / "topology.json"
    path.write_text(json.dumps(raw))
    plane = DataPlane(path, tmp / "run")
    plane.start(timeout_s=60)
    return plane


def running_plane(tmp: Path, topology: Path, **changes: Any) -> Iterator[DataPlane]:
    """For a fixture to ``yield from``: a started plane, stopped afterwards, whose logs must
    hold no traceback."""
    plane = start_plane(tmp, topology, **changes)
    yield plane
    plane.stop()
    assert tracebacks(plane.run_dir) == []


@pytest.fixture(scope="session")
def tiny_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPlane]:
    yield from running_plane(tmp_path_factory.mktemp("tiny"), TINY)


def post(
    plane: DataPlane, path: str, body: dict[str, Any], *, timeout: float = 30
) -> tuple[int, dict[str, str], Any]:
    """POST JSON to the gateway; returns (status, headers, parsed body or SSE events)."""
    request = urllib.request.Request(
        plane.gateway_url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {plane.api_key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read().decode()
            headers = {k.lower(): v for k, v in response.headers.items()}
            status = response.status
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, json.loads(exc.read())
    if headers.get("content-type", "").startswith("text/event-stream"):
        events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
        return status, headers, [e if e == "[DONE]" else json.loads(e) for e in events]
    return status, headers, json.loads(raw)


def stream_killing(
    plane: DataPlane, body: dict[str, Any], kill: tuple[str, ...], *, timeout: float = 30
) -> list[str]:
    """Stream a completion and kill the ``kill`` agents once its third event has arrived;
    returns the data of every SSE event read, up to and including ``[DONE]``."""
    request = urllib.request.Request(
        plane.gateway_url + "/v1/completions",
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Authorization": f"Bearer {plane.api_key}"},
    )
    lines: list[str] = []
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: "):
                lines.append(line[6:])
                if len(lines) == 3:
                    for agent_id in kill:
                        plane.kill(agent_id)
            if lines and lines[-1] == "[DONE]":
                break
    return lines


def agents_up(plane: DataPlane, *, timeout: float = 5) -> dict[str, bool]:
    """Which agents the gateway reaches now (its ``/health``)."""
    with urllib.request.urlopen(plane.gateway_url + "/health", timeout=timeout) as response:
        return dict(json.loads(response.read())["agents"])


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``condition`` every 0.1 s until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
