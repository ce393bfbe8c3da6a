"""The demo's scripted WAN incident, so that an SLA alert opens and resolves in the first minutes.

A while after start, the emulated WAN line's round trip is raised (``POST /degrade`` on the
emulator's control port, as an on-call drill would) for ``INCIDENT_S`` seconds, then set back to
the topology's own value. Requests whose KV cache crosses the line wait those extra round trips
(two or more before the first token), so the minute's TTFT P90 rises above the demo data plane's
SLA (``fixtures/dataplane/timed.json``: 5 s, a ``seed_demo`` rule) and falls back after: the alert
opens, then resolves. Nothing is faked: the alert is evaluated on the gateway's own records.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from pdd_core.agent.auth import WAN_TOKEN, AuthError, read_secret_file
from pdd_core.agent.config import WanSpec, load_config
from pdd_core.agent.supervisor.plane import WAN_TOKEN_FILE
from pdd_core.agent.tls import OPERATOR, TlsContexts
from pdd_core.agent.wan.control import control_request

INCIDENT_RTT_MS = 3000.0
INCIDENT_S = 60.0


def _degrade(wan: WanSpec, run_dir: Path, rtt_ms: float) -> tuple[int, dict[str, Any]]:
    """``POST /degrade`` as the plane's operator: its per-plane token and ``operator``
    certificate, both in ``pdd up``'s run directory beside the resolved configuration."""
    address = (wan.host, wan.control_port)
    token = read_secret_file(run_dir / WAN_TOKEN_FILE, WAN_TOKEN).decode()
    tls = TlsContexts.load(run_dir / "tls", OPERATOR).client
    body = {"rtt_ms": rtt_ms}
    return asyncio.run(control_request(address, token, "POST", "/degrade", body, tls=tls))


def _note(out: Any, text: str) -> None:
    """One line: ``at <Unix seconds> (<local time>) <text>``."""
    now = time.time()
    out.write(f"at {now:.1f} ({time.strftime('%H:%M:%S', time.localtime(now))}) {text}\n")
    out.flush()


def wan_incident(config_path: Path, after_s: float, stop: threading.Event, log: Path) -> None:
    """Raise the WAN round trip after ``after_s`` for ``INCIDENT_S``, then restore it; logs."""
    with log.open("a", encoding="utf-8") as out:
        if stop.wait(after_s):
            return
        try:
            wan = load_config(config_path).wan
            normal = wan.rtt_ms
            status, body = _degrade(wan, config_path.parent, INCIDENT_RTT_MS)
            _note(out, f"WAN rtt {INCIDENT_RTT_MS} ms: {status} {body}")
            if stop.wait(INCIDENT_S):
                return  # the demo is stopping: the emulator goes with it
            status, body = _degrade(wan, config_path.parent, normal)
            _note(out, f"WAN rtt back to {normal} ms: {status} {body}")
        except (OSError, ValueError, KeyError, TimeoutError, AuthError) as exc:
            _note(out, f"incident not run: {exc!r}")
