"""``make demo``'s scripted WAN incident: the seeded TTFT rule's alert opens, then resolves.

A real ``manage.py run_demo`` (control plane, ``pdd up`` of the timed plane, the alert
evaluator, ``pdd replay`` of the Mooncake sample and of the PDD mix) with its incident 30 s
after start: the emulated WAN's round trip is raised for a minute, then restored. The test reads
what an operator would, over the API: the ``demo-ttft-p90`` alert opens while the line is
degraded and resolves on a later one-minute window that met the SLA (so the demo's load fits the
machine outside the incident), the minute windows' TTFT P90 cross the rule's threshold only
around the incident, the mix's requests went P-RLD and P-RLD-MD with one-shot
handoffs, and no log holds a traceback. Minutes of wall time: the rule's windows are a minute long.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.demo_process import PYTHON, ROOT, Demo, running_demo

pytestmark = pytest.mark.system

INCIDENT_AFTER_S = 30
RULE = "demo-ttft-p90"
# How long after a minute ends its last reports are in (the shipper flushes every few seconds).
FLUSH_SLACK_S = 15


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "var") as running:
        yield running


def _operator_token(demo: Demo) -> str:
    done = subprocess.run(
        [PYTHON, "manage.py", "create_token", "--name", "incident-test", "--scope", "operator"],
        cwd=ROOT, env=demo.env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def _get(demo: Demo, token: str, path: str) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{demo.port}/api/v1/{path}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _alerts(demo: Demo, token: str) -> list[dict[str, Any]]:
    body = _get(demo, token, "telemetry/alerts/?page_size=100")
    rows = body["results"] if isinstance(body, dict) else body
    return [row for row in rows if row["rule"] == RULE]


def _wait_for(what: str, probe: Any, timeout_s: float, demo: Demo) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        assert demo.proc is not None and demo.proc.poll() is None, demo.log.read_text()
        time.sleep(5)
    pytest.fail(f"no {what} in {timeout_s} s:\n{demo.log.read_text()[-3000:]}")


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.timeout(1200)
def test_the_scripted_wan_incident_opens_the_ttft_alert_and_it_resolves(demo: Demo) -> None:
    demo.start("--incident-after", str(INCIDENT_AFTER_S))
    token = _operator_token(demo)
    threshold = next(
        r["threshold"]
        for r in _get(demo, token, "telemetry/sla-rules/?page_size=100")["results"]
        if r["slug"] == RULE
    )

    opened = _wait_for("open alert", lambda: _alerts(demo, token), 300, demo)[0]
    resolved = _wait_for(
        "resolution",
        lambda: [a for a in _alerts(demo, token) if a["state"] == "resolved"],
        300,
        demo,
    )[0]
    incident = incident_times(demo)
    assert len(incident) == 2, incident  # degraded, then restored
    # The alert can resolve on a window that still holds the incident's tail; a window wholly
    # after it (plus the slack for requests admitted under the degraded line) must close too.
    quiet = _wait_for(
        "quiet minute after the incident", lambda: _quiet(demo, token, incident), 300, demo
    )
    mix = _mix(demo, token)
    demo.interrupt()

    assert resolved["id"] == opened["id"]
    assert resolved["worst"] > threshold
    assert resolved["value"] <= threshold  # the window that resolved it met the SLA
    assert _iso(resolved["resolved_at"]) > _iso(resolved["first_seen"])
    # Outside the incident's minutes every window met the SLA: the load fits the machine.
    assert all(m["ttft_p90"] <= threshold for m in quiet), quiet
    # The demo's second load (controlplane/agents/management/demo_mix.py) takes PDD's other
    # pipelines and hands relayed requests over to MD one-shot when RLD holds another stream
    # (the demo table's rld_load_threshold, demo_mix.DEMO_ROUTING: the pair of long prompts
    # arrives together, so the first to hand over finds the other on RLD). Whether the second
    # then hands over extend-decode or finishes on RLD is a race between its 600 tokens and its
    # KV on a line that carries the first's too: 24% of relayed requests in a quiet 9-minute
    # run, none in a run on a loaded box, so the test does not require it (README's figures).
    assert {"P-MD", "P-RLD", "P-RLD-MD"} <= set(mix["pipelines"]), mix
    assert mix["handoffs"].get("one-shot", 0) > 0, mix
    assert demo.tracebacks() == []


def _mix(demo: Demo, token: str) -> dict[str, dict[str, int]]:
    """Requests per pipeline and handoff mode over the last ten minutes."""
    minutes = _get(demo, token, "telemetry/summary/?window=1m&points=10")["series"]
    mix: dict[str, dict[str, int]] = {"pipelines": {}, "handoffs": {}}
    for m in minutes:
        for kind, counts in mix.items():
            for name, n in m[kind].items():
                counts[name] = counts.get(name, 0) + n
    return mix


def _quiet(demo: Demo, token: str, incident: list[float]) -> list[dict[str, Any]]:
    """The closed one-minute windows with served requests that do not overlap the incident."""
    minutes = _get(demo, token, "telemetry/summary/?window=1m&points=10")["series"]
    now = time.time()
    return [
        m for m in minutes
        if m["ttft_p90"] is not None
        and _iso(m["start"]).timestamp() + 60 + FLUSH_SLACK_S < now
        and not _overlaps(m, incident[0], incident[1])
    ]  # fmt: skip


def incident_times(demo: Demo) -> list[float]:
    """When the incident log says the line was degraded and restored (Unix seconds)."""
    log = demo.data_dir / "demo" / "incident.log"
    stamps = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("at "):
            stamps.append(float(line.split()[1]))
    return stamps


def _overlaps(point: dict[str, Any], start: float, end: float) -> bool:
    """Whether a one-minute window overlaps the incident, with a minute's slack after it
    (requests admitted under the degraded line finish after it is restored)."""
    begin = _iso(point["start"]).timestamp()
    return begin < end + 60 and begin + 60 > start
