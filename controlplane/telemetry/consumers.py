"""``/ws/live/``: live telemetry points for the scopes a client subscribes to.

Connect with a session (browser) or a token (operator or viewer scope). Subscribe with
``?scope=all`` / ``?scope=site:dc-a`` on the URL, or later by sending
``{"action": "subscribe", "scope": "site", "key": "dc-a"}`` (``"unsubscribe"`` to leave).
Messages are ``{"event": "points", "scope", "key", "points": [...]}`` holding only the windows
that changed since the last push, and ``{"event": "alert", "alert": {...}}`` on the ``all``
scope when an alert opens or resolves.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from controlplane.core.consumers import ScopedJsonConsumer
from controlplane.telemetry.live import LIVE_SCOPES, live_group

_SCOPES = {s.value for s in LIVE_SCOPES}
MAX_SUBSCRIPTIONS = 64


def parse_subscription(scope: Any, key: Any = "") -> str | None:
    """The group of a (scope, key) pair, or None when it is not a valid subscription."""
    if not isinstance(scope, str) or not isinstance(key, str):
        return None
    if ":" in scope and not key:
        scope, key = scope.split(":", 1)
    if scope not in _SCOPES or (scope == "all") != (key == ""):
        return None
    if len(key) > 64 or not all(ch.isalnum() or ch in "-_." for ch in key):
        return None
    return live_group(scope, key)


class LiveConsumer(ScopedJsonConsumer):
    """One stream, many scopes: each subscription is a channel-layer group."""

    def group_names(self) -> list[str]:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        groups = [parse_subscription(value) for value in query.get("scope", [])]
        return [g for g in dict.fromkeys(groups) if g is not None][:MAX_SUBSCRIPTIONS]

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
