"""The gateway's liveness probe of the agents across the WAN: a blackhole is found in seconds.

A reset line or a killed agent closes the connection and the gateway knows at once; a
blackholed line (packets dropped, no reset) keeps the connection open and silent, and only
timeouts would tell, one request at a time. So the gateway pings every agent beyond the WAN
every ``PROBE_EVERY_S`` on the connection it already has (the frames cross the same line as
the tokens). Any frame from the agent counts as an answer (a busy MD streams tokens; its ping
may queue behind KV on the shared line). An agent from which nothing at all has arrived for
``PROBE_TIMEOUT_S`` is *unreachable*:
the router stops choosing it (P-RLD serves what needed MD) and the requests waiting on it are
told at once, so they resume elsewhere instead of waiting out their idle timeout. The first
answer after that makes it reachable again. Detection takes at most
``PROBE_EVERY_S + PROBE_TIMEOUT_S`` (2 s). If the gateway's own event loop was stalled (the
probe woke late), silence proves nothing about the line: the clocks start over instead.
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

    def watch(self, agent_id: str, link: PeerLink) -> None:
        """Probe one more agent across the line (it joined the plane)."""
        self.links[agent_id] = link
        self._answered[agent_id] = time.monotonic()

    def forget(self, agent_id: str) -> None:
        """Stop probing an agent that left the plane."""
        self.links.pop(agent_id, None)
        self._answered.pop(agent_id, None)
        self.unreachable.discard(agent_id)

    def is_probe(self, frame: Frame) -> bool:
        return frame.type is FrameType.PONG and frame.request_id.startswith(PROBE_PREFIX)

    def answered(self, agent_id: str) -> None:
        """A frame came back: the path to ``agent_id`` carries frames."""
        self._answered[agent_id] = time.monotonic()
        if self.unreachable and agent_id in self.unreachable:
            self.unreachable.discard(agent_id)
            log.warning("%s answers probes again: routing to it resumes", agent_id)

    async def run(self) -> None:
        woke = time.monotonic()
        while True:
            await asyncio.sleep(PROBE_EVERY_S)
            now = time.monotonic()
            if now - woke - PROBE_EVERY_S > PROBE_TIMEOUT_S / 2:
                # This loop was stalled (a busy event loop), so silence proves nothing.
                self._answered = dict.fromkeys(self.links, now)
                woke = time.monotonic()
                continue
            for agent_id, link in self.links.items():
                silent = now - self._answered[agent_id]
                if not link.up:
                    self._answered[agent_id] = now  # a new connection starts fresh
                elif silent > PROBE_TIMEOUT_S and agent_id not in self.unreachable:
                    self.unreachable.add(agent_id)
                    log.warning(
                        "%s has not answered a probe for %.1f s (WAN blackholed?): routing "
                        "around it", agent_id, silent,
                    )  # fmt: skip
                    self.on_lost(agent_id)
            await asyncio.gather(*(self._ping(link) for link in self.links.values() if link.up))
            woke = time.monotonic()

    async def _ping(self, link: PeerLink) -> None:
        ping = control(FrameType.PING, f"{PROBE_PREFIX}{next(self._numbers)}")
        with contextlib.suppress(ConnectionError, TimeoutError):
            await asyncio.wait_for(link.send(ping), PROBE_TIMEOUT_S)
