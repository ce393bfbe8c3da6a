"""The one way to push to WebSocket groups from sync code, throttled per group.

Groups are named ``<area>.<scope>.<id>`` (``inventory.all``, ``live.site.dc-a``). A push
to a group that was pushed to less than ``min_interval`` seconds ago is dropped unless
``force`` is set, so a burst of writes cannot flood browsers; callers send only new points.

Two groups are shared by several apps, so they are named here: ``config.all`` (every agent's
config channel: any app whose writes change what agents run calls ``config_changed`` after
its transaction commits) and ``auth.token.<id>`` (every socket opened with one API token:
``token_sockets_close`` closes them when the token is revoked).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

_lock = threading.Lock()
_last_push: dict[str, float] = {}


def group_name(area: str, scope: str = "all", ident: str | None = None) -> str:
    """Channels group names allow only ASCII letters, digits, hyphens, periods, underscores."""
    parts = [area, scope] + ([ident] if ident else [])
    return ".".join(parts)


CONFIG_GROUP = "config.all"


def token_group(token_id: int) -> str:
    """The group every socket authenticated by API token ``token_id`` joins."""
    return group_name("auth", "token", str(token_id))


def broadcast(
    group: str, payload: dict[str, Any], *, min_interval: float = 0.0, force: bool = False
) -> bool:
    """Send ``payload`` as a ``broadcast.message`` event to ``group``; False if throttled."""
    now = time.monotonic()
    with _lock:
        last = _last_push.get(group)
        if not force and last is not None and now - last < min_interval:
            return False
        _last_push[group] = now
    layer = get_channel_layer()
    if layer is None:
        return False
    async_to_sync(layer.group_send)(group, {"type": "broadcast.message", "payload": payload})
    return True


def broadcast_due(group: str, min_interval: float) -> bool:
    """Whether a throttled ``broadcast`` to ``group`` would be sent now: a caller whose payload
    costs more to build than to send skips building one that would be dropped."""
    with _lock:
        last = _last_push.get(group)
    return last is None or time.monotonic() - last >= min_interval


def throttle_reset() -> None:
    """Forget when each group was last pushed to (a fresh process's state; tests start so)."""
    with _lock:
        _last_push.clear()


def config_changed(reason: str) -> None:
    """Tell every agent's config channel to send its agent the current configuration now.

    Call after the write commits (``transaction.on_commit``): the channel reads the database.
    """
    broadcast(CONFIG_GROUP, {"event": "config.changed", "reason": reason}, force=True)


def token_sockets_close(token_id: int, code: int) -> None:
    """Close every WebSocket opened with API token ``token_id``, with close ``code``."""
    layer = get_channel_layer()
    if layer is not None:
        event = {"type": "socket.close", "code": code}
        async_to_sync(layer.group_send)(token_group(token_id), event)
