"""Live points: what the rollup flush pushes to ``/ws/live/`` after its transaction commits.

Groups are ``live.all``, ``live.site.<slug>``, ``live.pool.<pipeline>`` and
``live.tenant.<slug>``. A push carries only the windows the batch changed, with their full
current values (a point is a window: the page replaces a point with the same ``start`` and
appends a new one). Pushes go through ``core.broadcast`` throttled per group to one per
``TELEMETRY_LIVE_MIN_INTERVAL_S``; a dropped push is made good by the group's next one, which
carries the same windows' newer totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings

from controlplane.core.broadcast import broadcast, broadcast_due, group_name
from controlplane.telemetry.models import RollupScope, TelemetryRollup
from controlplane.telemetry.rollups import WINDOWS
from controlplane.telemetry.selectors import cost_rates, point_of

LIVE_SCOPES = (RollupScope.ALL, RollupScope.SITE, RollupScope.POOL, RollupScope.TENANT)
LIVE_AREA = "live"


def live_group(scope: str, key: str = "") -> str:
    """``live.all`` or ``live.<scope>.<key>``."""
    if scope == RollupScope.ALL:
        return group_name(LIVE_AREA)
    return group_name(LIVE_AREA, scope, key)


def split_scope(raw: str, allowed: frozenset[str] | None = None) -> tuple[str, str] | None:
    """``(scope, key)`` of ``all`` or ``<scope>:<key>`` (a live scope, or one of ``allowed``,
    with a slug-like key), or None when it is not one."""
    scope, _, key = raw.partition(":")
    scopes = allowed if allowed is not None else frozenset(s.value for s in LIVE_SCOPES)
    if scope not in scopes or (scope == RollupScope.ALL) != (key == ""):
        return None
    if len(key) > 64 or not all(ch.isalnum() or ch in "-_." for ch in key):
        return None
    return scope, key


def live_payloads(rows: Iterable[TelemetryRollup]) -> dict[str, dict[str, Any]]:
    """The message for each live group the rows belong to."""
    rates = cost_rates(cached=True)
    messages: dict[str, dict[str, Any]] = {}
    live = {s.value for s in LIVE_SCOPES}
    for row in rows:
        if row.window_s not in WINDOWS or row.scope not in live:
            continue
        group = live_group(row.scope, row.key)
        message = messages.setdefault(
            group, {"event": "points", "scope": row.scope, "key": row.key, "points": []}
        )
        message["points"].append(point_of(row, rates))
    return messages


def live_publish(rows: Iterable[TelemetryRollup]) -> int:
    """Push the rows' points to their groups (throttled); returns how many were sent. Points
    are built only for the groups whose throttle lets a push through now."""
    interval = float(settings.TELEMETRY_LIVE_MIN_INTERVAL_S)
    due = [row for row in rows if broadcast_due(live_group(row.scope, row.key), interval)]
    if not due:
        return 0
    return sum(
        broadcast(group, message, min_interval=interval)
        for group, message in live_payloads(due).items()
    )


def alert_publish(alert: Mapping[str, Any]) -> None:
    """Alert openings and resolutions are rare and must not be dropped: forced push."""
    broadcast(live_group(RollupScope.ALL), {"event": "alert", "alert": dict(alert)}, force=True)
