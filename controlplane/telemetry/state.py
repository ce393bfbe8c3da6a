"""The deployment's state as open pages show it, read from the database on a timer.

Alerts are evaluated by another process (``manage.py evaluate_alerts`` beside ``make demo``,
Celery beat in production), agents change state by heartbeats arriving (or not arriving: an
agent turns stale with no event at all), plans are activated by whichever web process took the
request. A push from those processes reaches a page only when both share a channel layer; the
embedded in-memory layer reaches its own process alone. So each ``/ws/live/`` socket that asks
for state (``?state=<scope>``) gets this snapshot every ``TELEMETRY_LIVE_STATE_INTERVAL_S``
when it changed (and at least every ``KEEPALIVE_S``), read from the database, which every
process shares: the same on every backend. One process reads a scope's snapshot at most once
per interval however many sockets ask (``_cache``), so the cost is a few indexed queries per
interval per process, not per page.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from django.conf import settings

from controlplane.telemetry import integrations
from controlplane.telemetry.alerts import alert_json
from controlplane.telemetry.attainment import sla_panel
from controlplane.telemetry.models import AlertState
from controlplane.telemetry.selectors import alert_list

KEEPALIVE_S = 10.0
_lock = threading.Lock()
_cache: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}


def _iso(t: datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t else None


def _agents() -> list[dict[str, Any]] | None:
    rows = integrations.agents()
    if rows is None:
        return None
    return [
        {**row, "registered_at": _iso(row["registered_at"]),
         "last_heartbeat_at": _iso(row["last_heartbeat_at"])}
        for row in rows
    ]  # fmt: skip


def state_read(scope: str = "all", key: str = "") -> dict[str, Any]:
    """The snapshot itself: open alerts, agents, the active plan and the SLA panel of a scope."""
    plan = integrations.active_plan()
    agents = _agents()
    return {
        "event": "state",
        "scope": scope,
        "key": key,
        "open_alerts": [alert_json(a) for a in alert_list(state=AlertState.OPEN)],
        "agents": agents,
        "agents_healthy": None if agents is None else sum(a["healthy"] for a in agents),
        "plan": None if plan is None else {"version": plan.version, "bcr": plan.predicted_bcr},
        "sla": sla_panel(scope=scope, key=key),
    }


def state_snapshot(scope: str = "all", key: str = "", *, fresh: bool = False) -> dict[str, Any]:
    """``state_read``, shared by this process's sockets for one interval; ``fresh`` reads anew
    (a socket's first state must not be older than the page it opened from)."""
    interval = float(settings.TELEMETRY_LIVE_STATE_INTERVAL_S)
    now = time.monotonic()
    with _lock:
        hit = _cache.get((scope, key))
    if not fresh and hit is not None and now - hit[0] < interval * 0.9:
        return hit[1]
    snapshot = state_read(scope, key)
    with _lock:
        _cache[(scope, key)] = (now, snapshot)
    return snapshot


def state_cache_clear() -> None:
    """Forget the shared snapshots (tests start from a fresh process's state)."""
    with _lock:
        _cache.clear()
