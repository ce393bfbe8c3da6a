"""``/ws/live/``: live telemetry points for the scopes a client subscribes to.

Connect with a session (browser) or a token (operator or viewer scope). Subscribe with
``?scope=all`` / ``?scope=site:dc-a`` on the URL, or later by sending
``{"action": "subscribe", "scope": "site", "key": "dc-a"}`` (``"unsubscribe"`` to leave).
Messages are ``{"event": "points", "scope", "key", "points": [...]}`` holding only the windows
that changed since the last push, and ``{"event": "alert", "alert": {...}}`` on the ``all``
scope when an alert opens or resolves.

``?state=all`` (or ``?state=site:dc-a``...) also asks for the deployment's state of that scope
(``telemetry.state``: open alerts, agents, the active plan, the SLA panel) as
``{"event": "state", ...}``: at once, then whenever it changed, read from the database every
``TELEMETRY_LIVE_STATE_INTERVAL_S``, so what other processes change reaches the page whatever
the channel layer (the in-memory one reaches its own process only).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings

from controlplane.core.consumers import ScopedJsonConsumer
from controlplane.telemetry.live import live_group, split_scope
from controlplane.telemetry.state import KEEPALIVE_S, state_snapshot

MAX_SUBSCRIPTIONS = 64


def parse_subscription(scope: Any, key: Any = "") -> str | None:
    """The group of a (scope, key) pair, or None when it is not a valid subscription."""
    if not isinstance(scope, str) or not isinstance(key, str):
        return None
    if ":" in scope and not key:
        scope, key = scope.split(":", 1)
    found = split_scope(f"{scope}:{key}" if key else scope)
    return None if found is None else live_group(*found)


class LiveConsumer(ScopedJsonConsumer):
    """One stream, many scopes: each subscription is a channel-layer group."""

    state_task: asyncio.Task[None] | None = None

    def _query(self) -> dict[str, list[str]]:
        return parse_qs(self.scope.get("query_string", b"").decode("latin1"))

    def group_names(self) -> list[str]:
        groups = [parse_subscription(value) for value in self._query().get("scope", [])]
        return [g for g in dict.fromkeys(groups) if g is not None][:MAX_SUBSCRIPTIONS]

    async def connect(self) -> None:
        await super().connect()
        wanted = self._query().get("state", [])
        target = split_scope(wanted[0]) if wanted else None
        if target is not None and self.admitted:
            self.state_task = asyncio.ensure_future(self._send_state(*target))

    async def disconnect(self, code: int) -> None:
        if self.state_task is not None:
            self.state_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.state_task
        await super().disconnect(code)

    async def _send_state(self, scope: str, key: str) -> None:
        """The state of ``scope`` now, then on change (or every ``KEEPALIVE_S``)."""
        read = database_sync_to_async(state_snapshot)
        interval = float(settings.TELEMETRY_LIVE_STATE_INTERVAL_S)
        last: dict[str, Any] | None = None
        sent_at = 0.0
        fresh = True  # the page rendered a moment ago: its first state is read anew
        while True:
            snapshot = await read(scope, key, fresh=fresh)
            fresh = False
            if snapshot != last or time.monotonic() - sent_at >= KEEPALIVE_S:
                await self.send_json(snapshot)
                last, sent_at = snapshot, time.monotonic()
            await asyncio.sleep(interval)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        action = content.get("action") if isinstance(content, dict) else None
        group = (
            parse_subscription(content.get("scope"), content.get("key", ""))
            if isinstance(content, dict)
            else None
        )
        if action not in {"subscribe", "unsubscribe"} or group is None:
            await self.send_json(
                {"error": {"code": "invalid", "message":
                    'Send {"action": "subscribe"|"unsubscribe", "scope": "all"|"site"|"pool"|'
                    '"tenant", "key": "<slug>"}.'}}
            )  # fmt: skip
            return
        joined: list[str] = self.joined
        if action == "subscribe" and group not in joined:
            if len(joined) >= MAX_SUBSCRIPTIONS:
                await self.send_json({"error": {"code": "too_many", "message": "Too many."}})
                return
            await self.channel_layer.group_add(group, self.channel_name)
            joined.append(group)
        elif action == "unsubscribe" and group in joined:
            await self.channel_layer.group_discard(group, self.channel_name)
            joined.remove(group)
        await self.send_json({"event": f"{action}d", "group": group})
