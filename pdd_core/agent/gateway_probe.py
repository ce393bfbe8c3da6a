"""The gateway's liveness probe of the agents across the WAN: a blackhole is found in seconds.

A reset line or a killed agent closes the connection and the gateway knows at once; a
blackholed line (packets dropped, no reset) keeps the connection open and silent, and only
timeouts would tell, one request at a time. So the gateway pings every agent beyond the WAN
every ``PROBE_EVERY_S`` on the connection it already has (the frames cross the same line as
the tokens). An agent that has not answered a ping for ``PROBE_TIMEOUT_S`` is *unreachable*:
the router stops choosing it (P-RLD serves what needed MD) and the requests waiting on it are
told at once, so they resume elsewhere instead of waiting out their idle timeout. The first
answer after that makes it reachable again. Detection takes at most
``PROBE_EVERY_S + PROBE_TIMEOUT_S`` (2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable

from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import PeerLink

log = logging.getLogger("pdd_core.agent.gateway")
PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_S = 1.5
PROBE_PREFIX = "probe-"


class LinkProbe:
    """Pings ``links`` and keeps ``unreachable`` (agent ids) up to date."""

    def __init__(self, links: dict[str, PeerLink], on_lost: Callable[[str], None]) -> None:
        self.links = links
        self.on_lost = on_lost
        self.unreachable: set[str] = set()
        self._answered = dict.fromkeys(links, time.monotonic())
        self._numbers = itertools.count(1)

    def is_probe(self, frame: Frame) -> bool:
        return frame.type is FrameType.PONG and frame.request_id.startswith(PROBE_PREFIX)

    def answered(self, agent_id: str) -> None:
        """A PONG came back: the path to ``agent_id`` carries frames."""
        self._answered[agent_id] = time.monotonic()
        if agent_id in self.unreachable:
            self.unreachable.discard(agent_id)
            log.warning("%s answers probes again: routing to it resumes", agent_id)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(PROBE_EVERY_S)
            now = time.monotonic()
            for agent_id, link in self.links.items():
                if not link.up:
                    self._answered[agent_id] = now  # a new connection starts fresh
                    continue
                ping = control(FrameType.PING, f"{PROBE_PREFIX}{next(self._numbers)}")
                with contextlib.suppress(ConnectionError, TimeoutError):
                    await asyncio.wait_for(link.send(ping), PROBE_TIMEOUT_S)
                silent = now - self._answered[agent_id]
                if silent > PROBE_TIMEOUT_S and agent_id not in self.unreachable:
                    self.unreachable.add(agent_id)
                    log.warning(
                        "%s has not answered a probe for %.1f s (WAN blackholed?): routing "
                        "around it", agent_id, silent,
                    )  # fmt: skip
                    self.on_lost(agent_id)
