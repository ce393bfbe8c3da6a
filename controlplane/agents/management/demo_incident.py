"""The demo's scripted WAN incident, so that an SLA alert opens and resolves in the first minutes.

A while after start, the emulated WAN line's round trip is raised (``POST /degrade`` on the
emulator's control port, as an on-call drill would) for ``INCIDENT_S`` seconds, then set back to
the topology's own value. Requests whose KV cache crosses the line wait those extra round trips
before their first token, so the TTFT of the 5 s windows rises above the demo rule's threshold
(``seed_demo``: TTFT P90 above 0.5 s) and falls back after. Nothing is faked: the records the
alert is evaluated on are the gateway's own.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from pdd_core.agent.wan_control import control_request

INCIDENT_RTT_MS = 1500.0
INCIDENT_S = 45.0


def _wan(config_path: Path) -> dict[str, Any]:
    wan: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))["wan"]
    return wan


def _degrade(wan: dict[str, Any], rtt_ms: float) -> tuple[int, dict[str, Any]]:
    address = (str(wan["host"]), int(wan["control_port"]))
    body = {"rtt_ms": rtt_ms}
    return asyncio.run(
        control_request(address, str(wan["control_token"]), "POST", "/degrade", body)
    )


def _note(out: Any, text: str) -> None:
    out.write(f"{time.strftime('%H:%M:%S')} {text}\n")
    out.flush()


def wan_incident(config_path: Path, after_s: float, stop: threading.Event, log: Path) -> None:
    """Raise the WAN round trip after ``after_s`` for ``INCIDENT_S``, then restore it; logs."""
    with log.open("a", encoding="utf-8") as out:
        if stop.wait(after_s):
            return
        try:
            wan = _wan(config_path)
            normal = float(wan["rtt_ms"])
            status, body = _degrade(wan, INCIDENT_RTT_MS)
            out.write(
                f"{time.strftime('%H:%M:%S')} WAN rtt {INCIDENT_RTT_MS} ms: {status} {body}\n"
            )
            out.flush()
            stop.wait(INCIDENT_S)
            status, body = _degrade(wan, normal)
            _note(out, f"WAN rtt back to {normal} ms: {status} {body}")
        except (OSError, ValueError, KeyError, TimeoutError) as exc:
            _note(out, f"incident not run: {exc!r}")
