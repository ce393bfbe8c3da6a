"""One attempt of a request at the gateway: what it knows of its agents and what it counts.

A request runs as one or more attempts (``gateway.run``): the first, and a resume on other
agents after a loss. Each attempt knows how far its route got (P's pass ended, P shipped the
KV, the relay handed off, MD produced tokens), which decides whether losing an agent dooms it
and which agent a silence is blamed on; and it counts its own part of the request's record
(``pdd_core.records.AttemptRecord``: its prefill's hit and miss, the tokens it delivered, the
bytes its transfer put on the WAN), of which the request's record takes the parts the client
got (``pdd_core.records`` says which).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pdd_core.agent.gateway.types import Outcome, Route, UpstreamError, real_bytes
from pdd_core.records import AttemptRecord
from pdd_core.routing import Pipeline

log = logging.getLogger("pdd_core.agent.gateway")


class AgentLost(UpstreamError):
    """An attempt failed because of an agent (dead, silent or erring): resumable."""

    def __init__(self, message: str, agent: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent


@dataclass(slots=True)
class Attempt:
    """One try at (the rest of) a request on one route, from output token ``offset`` on (the
    tokens delivered before it are part of its prompt); ``record`` is its entry in the
    request's record."""

    request_id: str
    route: Route
    offset: int = 0
    record: AttemptRecord = field(default_factory=lambda: AttemptRecord("", ""))
    passed: bool = False  # P's pass ended (PREFILLED)
    prefilled: bool = False  # P shipped the KV (KV_DONE)
    counted: bool = False  # P's hit and miss of this attempt's prompt are known
    handed_off: bool = False
    md_tokens: int = 0

    def __post_init__(self) -> None:
        route = self.route
        self.record = AttemptRecord(self.request_id, route.pipeline.value, route.prefill,
                                    route.relay or "", route.main or "")  # fmt: skip

    def rerouted(self, route: Route) -> None:
        """The check at the end of prefill relayed this attempt (P-RLD-MD through a relay)."""
        self.route = route
        self.record.pipeline, self.record.relay_agent = route.pipeline.value, route.relay or ""

    def count_prefill(self, outcome: Outcome, body: Mapping[str, Any], tokens: int) -> None:
        """P's hit and miss of this attempt's prompt (``tokens`` long; from PREFILLED, or from
        KV_DONE for a P that does not say them at the end of its pass). The client's request
        counts those of the attempt whose prefill it got: one over its prompt as sent (no token
        delivered before the attempt); a later attempt prefills a longer sequence."""
        hit = body.get("hit_tokens")
        if self.counted or isinstance(hit, bool) or not isinstance(hit, int):
            return
        self.counted = True
        hit = max(0, min(hit, tokens))
        self.record.hit_tokens, self.record.miss_tokens = hit, tokens - hit
        if self.offset == 0:
            outcome.hit_tokens, outcome.miss_tokens, outcome.prefilled = hit, tokens - hit, True

    def count_wan(self, outcome: Outcome, body: Mapping[str, Any], payload_scale: float) -> None:
        """The bytes this attempt's KV transfer put on the WAN, at their real size: the
        attempt's own and the request's sum (every attempt's transfer crossed the line)."""
        wire, kv = body.get("wan_bytes", 0), body.get("wan_kv_bytes", 0)
        if not isinstance(wire, int) or not isinstance(kv, int) or not 0 <= kv <= wire:
            log.warning("%s: KV_DONE with malformed byte counts %r", self.request_id, body)
            return
        nbytes = real_bytes(wire, kv, payload_scale)
        self.record.wan_bytes += nbytes
        outcome.pdd.wan_bytes += nbytes

    def silent(self, delivered: int) -> str | None:
        """The agent a stalled attempt was waiting for (the one to avoid next time)."""
        route = self.route
        if not self.prefilled and delivered == 0:
            if not self.passed:
                return route.prefill  # P never ended the pass (nor answered a PING)
            return route.prefill if route.pipeline is not Pipeline.P_MD else route.main
        if route.relay is None or self.handed_off or self.md_tokens > 0:
            return route.main
        return route.relay

    def fatal(self, agent: str) -> bool:
        """Whether losing ``agent`` dooms this attempt at this point."""
        route = self.route
        if agent == route.prefill:
            return not self.prefilled
        if agent == route.relay:
            return route.main is None or (self.md_tokens == 0 and not self.handed_off)
        if agent == route.main:
            return route.relay is None or self.handed_off or self.md_tokens > 0
        return False
