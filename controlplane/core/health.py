"""Probes for process managers: ``/healthz`` (the process answers) and ``/readyz`` (it can serve:
the database and the channel layer answer).

Kubernetes restarts a pod whose liveness probe fails and takes a pod out of its Service while
its readiness probe fails, so the two must differ: a database outage makes every web pod
unready (no traffic is sent to pods that would answer 500) without restarting them all. Both
are open without credentials, as probes come from the kubelet, and they say only which check
failed and its error's class (never a message that could carry a connection string).
Each check is bounded by ``CHECK_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse

CHECK_TIMEOUT_S = 2.0


async def healthz(request: HttpRequest) -> JsonResponse:
    """200 while the process serves requests at all."""
    return JsonResponse({"status": "ok"})


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


async def _channel_layer() -> None:
    """A message through the layer to a channel of this process and back."""
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    name = await layer.new_channel()
    await layer.send(name, {"type": "health.ping"})
    await layer.receive(name)


async def _check(probe: Callable[[], Awaitable[None]]) -> str:
    try:
        await asyncio.wait_for(probe(), timeout=CHECK_TIMEOUT_S)
    except TimeoutError:
        return f"timeout after {CHECK_TIMEOUT_S} s"
    except Exception as exc:  # any failure of the dependency is the answer, not a 500
        return f"error: {type(exc).__name__}"
    return "ok"


async def readyz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the channel layer answer, else 503 naming the failing one."""
    checks = {
        "database": await _check(sync_to_async(_database, thread_sensitive=True)),
        "channel_layer": await _check(_channel_layer),
    }
    ready = all(result == "ok" for result in checks.values())
    body = {"status": "ok" if ready else "unavailable", "checks": checks}
    return JsonResponse(body, status=200 if ready else 503)
