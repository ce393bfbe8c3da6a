"""Graceful shutdown of the web process (daphne): on SIGTERM, every open WebSocket is closed with
``CLOSE_RESTART`` (4503: reconnect) and the process exits within ``DEADLINE_S``.

A rollout sends SIGTERM to each web pod. Before this module, agents' sockets were dropped
without a close code (1006) and the process could outlive the grace period: worker threads of
``sync_to_async`` still blocked in a database or Redis call are joined when the interpreter
finalizes, so Kubernetes waited the whole grace period per pod and then sent SIGKILL. Now:

1. SIGTERM (the asyncio loop's handler, installed once the reactor runs) closes every tracked
   consumer with 4503, so agents reconnect (to another pod) at once, and stops the reactor
   after ``CLOSE_WAIT_S`` for the close frames to leave;
2. daphne then cancels its application instances and the reactor shuts down; after that
   nothing is left to do, so the process exits at once (``os._exit`` after flushing the
   output), without joining threads that may be blocked;
3. a watchdog thread exits the process ``DEADLINE_S`` after SIGTERM whatever still runs.

SIGINT (Ctrl-C) takes the same path.

Outside daphne (tests, other servers) ``install`` does nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import weakref
from typing import Any

CLOSE_RESTART = 4503
CLOSE_WAIT_S = 0.5
DEADLINE_S = 5.0

log = logging.getLogger(__name__)
_open: weakref.WeakSet[Any] = weakref.WeakSet()
_closing: set[asyncio.Future[None]] = set()  # the shutdown task, kept from the collector


def track(consumer: Any) -> None:
    """An accepted WebSocket consumer: closed with ``CLOSE_RESTART`` on shutdown."""
    _open.add(consumer)


def untrack(consumer: Any) -> None:
    _open.discard(consumer)


async def close_all(code: int = CLOSE_RESTART) -> int:
    """Close every tracked socket with ``code``; returns how many there were."""
    consumers = list(_open)
    for consumer in consumers:
        await consumer.close(code=code)
    return len(consumers)


def _exit_now(code: int = 0) -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def closing() -> bool:
    """Whether SIGTERM arrived: a socket opening now is refused with ``CLOSE_RESTART``."""
    return bool(_closing)


def _on_sigterm(reactor: Any) -> None:
    if _closing:
        return
    watchdog = threading.Timer(DEADLINE_S, _exit_now, kwargs={"code": 0})
    watchdog.daemon = True
    watchdog.start()

    async def close_then_stop() -> None:
        try:
            closed = await asyncio.wait_for(close_all(), timeout=DEADLINE_S / 2)
            log.info("SIGTERM: closed %d WebSockets with %d (reconnect)", closed, CLOSE_RESTART)
            await asyncio.sleep(CLOSE_WAIT_S)
        finally:
            reactor.stop()

    _closing.add(asyncio.ensure_future(close_then_stop()))


def install() -> None:
    """Under daphne (Twisted's asyncio reactor), take over SIGTERM as described above."""
    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import reactor as installed

    reactor: Any = installed  # daphne installs the asyncio reactor before it loads the app
    loop = getattr(reactor, "_asyncioEventloop", None)
    if loop is None:
        return

    def when_running() -> None:
        # SIGINT (Ctrl-C of make serve) the same way, watchdog included: Twisted's own SIGINT
        # handler stops the reactor but bounds nothing, and a shutdown stuck behind a blocked
        # worker thread then never reaches the "after shutdown" exit (once in CI: 60 s).
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, _on_sigterm, reactor)

    reactor.callWhenRunning(when_running)
    reactor.addSystemEventTrigger("after", "shutdown", _exit_now)
