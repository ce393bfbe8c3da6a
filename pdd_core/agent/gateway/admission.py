"""The gateway's admission state: decode slots held on each RLD and MD, WAN flows in flight.

Overload must be refused before the first token, never discovered mid-stream: a decode agent
batches at most ``relay_batch`` (RLD) or ``decode_batch`` (MD) requests, and a request past
that would sit unserved until the gateway's idle timeout fails it. So the gateway holds a slot
on each decode agent a request will use from the moment it is routed (a burst sees its own
load) until the agent is done with it: the relay's slot frees at the handoff, MD's at the end.
A request that finds no slot on the agents its pipeline needs (and no other pipeline that
could serve it) gets 429 with ``Retry-After``.

The same object tracks the KV transfers crossing the WAN, per request from the end of its
prefill (P's ``PREFILLED``) until MD reports the KV landed (``KV_LANDED``), the simulator's
window; the gateway keys a flow by the negated ticket, apart from the route's slots. They are
the flows ``pdd_core.predict`` shares the line among for a new transfer, and the line's
utilisation (the share of the last ``LOAD_WINDOW_S`` during which some transfer was on it, an
exponential average), which the simulator's line reports the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping

from pdd_core.routing import Pipeline

LOAD_WINDOW_S = 10.0  # the simulator's WAN load window (``sim.wan.WanLine.load_window_s``)


class Admission:
    """Slots per decode agent and the WAN flows in flight, keyed by the route's ticket."""

    def __init__(self, capacity: Mapping[str, int]) -> None:
        self.capacity = dict(capacity)
        self.held = dict.fromkeys(self.capacity, 0)
        self.wan: dict[int, float] = {}
        self._slots: dict[int, list[str]] = {}
        self._ewma, self._ewma_at = 0.0, time.monotonic()

    def add(self, agent: str, capacity: int) -> None:
        """A decode agent joined the plane with ``capacity`` slots."""
        self.capacity[agent] = capacity
        self.held.setdefault(agent, 0)

    def utilisation(self, now: float | None = None) -> float:
        """Share of the recent past during which some KV transfer was on the WAN (0-1)."""
        now = time.monotonic() if now is None else now
        decay = math.exp(-max(0.0, now - self._ewma_at) / LOAD_WINDOW_S)
        return self._ewma * decay + (1.0 if self.wan else 0.0) * (1.0 - decay)

    def _mark(self) -> None:
        now = time.monotonic()
        self._ewma, self._ewma_at = self.utilisation(now), now

    def has_room(self, agent: str) -> bool:
        return self.held[agent] < self.capacity[agent]

    def with_room(self, agents: Iterable[str]) -> list[str]:
        """``agents`` that can take one more request, least loaded first (stable)."""
        return sorted((a for a in agents if self.has_room(a)), key=lambda a: self.held[a])

    def hold(self, ticket: int, agents: Iterable[str | None], wan_bytes: float) -> None:
        """Take a slot on each agent (None skipped) and register the request's WAN flow."""
        taken = [a for a in agents if a is not None]
        for agent in taken:
            self.held[agent] += 1
        self._slots[ticket] = taken
        if wan_bytes > 0:
            self._mark()
            self.wan[ticket] = wan_bytes

    def end_slot(self, ticket: int, agent: str | None) -> None:
        """The request no longer needs ``agent`` (the relay after its handoff)."""
        slots = self._slots.get(ticket)
        if agent is not None and slots is not None and agent in slots:
            slots.remove(agent)
            self.held[agent] -= 1

    def end_transfer(self, ticket: int) -> None:
        """P reported the KV delivered: the flow leaves the line."""
        if ticket in self.wan:
            self._mark()
            del self.wan[ticket]

    def release(self, ticket: int) -> None:
        """Everything the request held (idempotent)."""
        for agent in self._slots.pop(ticket, []):
            self.held[agent] -= 1
        self.end_transfer(ticket)


def servable(
    pipeline: Pipeline, reason: str, relay_free: bool, main_free: bool
) -> tuple[Pipeline | None, str]:
    """The pipeline as routed, or the other decode path when its stage has no free slot (or
    is down), or None: no decode agent can take the request now."""
    needs_relay = pipeline is not Pipeline.P_MD
    needs_main = pipeline is not Pipeline.P_RLD
    if (not needs_relay or relay_free) and (not needs_main or main_free):
        return pipeline, reason
    if relay_free:
        return Pipeline.P_RLD, "no main decode reachable with a free slot: the relay finishes it"
    if main_free:
        return Pipeline.P_MD, "no relay reachable with a free slot: main decode serves it"
    return None, "no decode slot free"
