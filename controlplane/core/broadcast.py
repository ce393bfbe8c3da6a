"""The one way to push to WebSocket groups from sync code, throttled per group.

Groups are named ``<area>.<scope>.<id>`` (``inventory.all``, later ``live.site.dc-a``). A push
to a group that was pushed to less than ``min_interval`` seconds ago is dropped unless
``force`` is set, so a burst of writes cannot flood browsers; callers send only new points.
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
