"""The plain data of the gateway's requests: the route, the outcome, the stream merge, errors.

Kept apart from ``gateway`` (connections and control flow) so the response shapes and the
tests can use them without the machinery.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pdd_core import metrics
from pdd_core.errors import PddError
from pdd_core.records import AttemptRecord, RequestRecord
from pdd_core.routing import Pipeline
from pdd_core.specs import SLA


class UpstreamError(PddError):
    """The request failed inside the data plane (an agent died, timed out or reported an error)."""

    status = 502
    code = "upstream_error"


class RequestTimedOut(UpstreamError):
    """The request ran past the gateway's own bound (``limits.request_timeout_s``): no agent
    failed, so it is neither resumed elsewhere nor blamed on one."""

    status = 504
    code = "request_timeout"


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request goes and what the router predicted for it."""

    pipeline: Pipeline
    reason: str
    prefill: str
    relay: str | None
    main: str | None
    hit_tokens_p: int
    hit_tokens_md: int
    predicted_ttft_s: float
    prefill_s: float
    rejected: bool = False
    retry_after_s: int = 0
    ticket: int = 0
    forced: bool = False  # the request forced its pipeline (allow_route_override)
    # The control plane's config version whose routing table decided this route (None: the
    # file's own table); the request's record names it, so billing can group by it.
    config_version: int | None = None


@dataclass(slots=True)
class PddUsage:
    """How PDD served a request, beyond OpenAI's token counts: the handoff from relay to main
    decode, the output tokens each of them decoded, and the bytes that crossed the WAN (at their
    real size: ``real_bytes`` scales the timed engine's KV payload back).

    The gateway tallies it in a request's ``Outcome``, reports it as the ``pdd`` part of the
    completion's ``usage`` (``openai_format``), and clients read it back from there (``replay``):
    one set of names and defaults for all three.
    """

    handoff_mode: str = ""
    rld_tokens: int = 0
    md_tokens: int = 0
    wan_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> PddUsage:
        """Read back from a response's ``usage.pdd`` (an absent figure is zero; a malformed one
        raises ``ValueError``)."""
        return cls(
            handoff_mode=str(body.get("handoff_mode", "")),
            rld_tokens=int(body.get("rld_tokens", 0)),
            md_tokens=int(body.get("md_tokens", 0)),
            wan_bytes=int(body.get("wan_bytes", 0)),
        )


@dataclass(slots=True)
class Outcome:
    """What the gateway learned of a request by its end (for usage, headers and the journal).

    ``hit_tokens`` / ``miss_tokens`` are those of the attempt whose prefill the client got
    (``prefilled``: whether a prefill of the client's prompt ended at all); ``from_md`` holds,
    per token in ``tokens``, whether main decode produced it (else the relay), so a record
    splits exactly the tokens a client received; ``attempts`` has one entry per attempt.
    """

    request_id: str
    route: Route
    tokens: list[int] = field(default_factory=list)
    hit_tokens: int = 0
    miss_tokens: int = 0
    pdd: PddUsage = field(default_factory=PddUsage)
    error: str = ""
    resumes: int = 0  # attempts after the first (an agent was lost mid-way)
    finish_reason: str = "length"
    arrival: float = field(default_factory=time.time)
    first_token_at: float | None = None
    last_token_at: float | None = None
    prompt_tokens: int = 0
    prefilled: bool = False
    from_md: bytearray = field(default_factory=bytearray)
    attempts: list[AttemptRecord] = field(default_factory=list)


class StreamMerge:
    """Joins the token streams of RLD and MD into one, by output index.

    Each source sends ``(index, tokens)``; tokens are delivered strictly in index order, a gap
    waits for the token that fills it, and an index seen before is ignored. So whatever the
    arrival order across the two connections, the client gets every position exactly once.
    The stream is complete once the end-of-stream frame's last index has been delivered.
    """

    def __init__(self) -> None:
        self.delivered = 0
        self.end: int | None = None
        self._pending: dict[int, tuple[int, str]] = {}

    @property
    def complete(self) -> bool:
        return self.end is not None and self.delivered >= self.end

    def add(
        self, index: int, tokens: list[int], source: str, *, last: bool
    ) -> list[tuple[int, str]]:
        """Take one frame; returns the ``(token, source)`` pairs now deliverable, in order."""
        for offset, token in enumerate(tokens):
            if index + offset >= self.delivered:
                self._pending.setdefault(index + offset, (token, source))
        if last:
            self.end = index + len(tokens)
        out: list[tuple[int, str]] = []
        while self.delivered in self._pending:
            out.append(self._pending.pop(self.delivered))
            self.delivered += 1
        return out


@dataclass(frozen=True, slots=True)
class RecordContext:
    """Who a record is for and who writes it."""

    tenant: str
    key_prefix: str
    model: str
    site: str
    agent: str


def real_bytes(wire_bytes: int, kv_bytes: int, payload_scale: float) -> int:
    """Bytes at the model's real size from the bytes that crossed the wire.

    The timed engine ships KV at ``payload_scale`` of its size (over a line emulated at the same
    fraction of the bandwidth, so transfer times are the real ones); frame headers and the
    blocks' token ids travel at their own size. Of ``wire_bytes``, ``kv_bytes`` are KV payload
    and are scaled back; the rest counts as it is. The API, the journal, the replay summary
    and ``pdd parity`` all report this, converted here once.
    """
    if payload_scale <= 0:
        raise ValueError(f"payload_scale: must be > 0, got {payload_scale!r}")
    if not 0 <= kv_bytes <= wire_bytes:
        raise ValueError(f"kv_bytes: must be within 0..{wire_bytes}, got {kv_bytes}")
    return wire_bytes - kv_bytes + round(kv_bytes / payload_scale)


def gateway_record(
    outcome: Outcome | None,
    route: Route,
    context: RecordContext,
    sla: SLA,
    *,
    failed: bool,
    error: str = "",
    request_id: str = "",
    delivered: int | None = None,
) -> RequestRecord:
    """The gateway's complete record of a request (``pdd_core.records`` says what each figure
    counts): figures, fate (the agent of each stage, the handoff, what failed, each attempt of
    a resumed request) and whether it met the SLA. A failure counts only what it delivered:
    ``output_tokens`` are the tokens that reached the client (``delivered``, when the caller
    knows it; else every token the data plane produced), and ``rld_tokens`` / ``md_tokens``
    split exactly those."""
    now = time.time()
    route = outcome.route if outcome else route  # the pipeline that served it
    record = RequestRecord(
        request_id=outcome.request_id if outcome else request_id or f"rej-{uuid.uuid4().hex}",
        tenant=context.tenant,
        model=context.model,
        site=context.site,
        pipeline=route.pipeline.value,
        arrival=outcome.arrival if outcome else now,
        finish=now,
        api_key_prefix=context.key_prefix,
        role="gateway",
        agent=context.agent,
        rejected=route.rejected,
        prefill_agent=route.prefill,
        relay_agent=route.relay or "",
        main_agent=route.main or "",
        error=error or (outcome.error if outcome else "") or ("failed" if failed else ""),
        config_version=route.config_version,
    )
    if route.rejected:
        record.error = f"rejected: {route.reason}"
    if outcome is not None:
        _fill(record, outcome, route, delivered)
    # The product's one rule (pdd_core.metrics): served, TTFT and mean TPOT within the P90
    # targets; a one-token answer has no TPOT to miss.
    record.sla_met = metrics.request_meets_sla(
        record.ttft_s if record.ttft_s is not None else math.inf,
        record.tpot_s if record.tpot_s is not None else 0.0,
        sla.ttft_p90_s,
        sla.tpot_p90_s,
        served=not failed and not route.rejected and record.ttft_s is not None,
    )
    return record


def _fill(record: RequestRecord, outcome: Outcome, route: Route, delivered: int | None) -> None:
    """The figures of ``outcome`` a client received ``delivered`` tokens of."""
    produced = len(outcome.tokens)
    count = produced if delivered is None else max(0, min(delivered, produced))
    if outcome.prefilled:
        record.hit_tokens, record.miss_tokens = outcome.hit_tokens, outcome.miss_tokens
    elif count:  # tokens came before P's counts did (they ride another connection): the route's
        record.hit_tokens = min(route.hit_tokens_p, outcome.prompt_tokens)
        record.miss_tokens = outcome.prompt_tokens - record.hit_tokens
    record.output_tokens = count
    record.md_tokens = outcome.from_md[:count].count(1)
    record.rld_tokens = count - record.md_tokens
    pdd = outcome.pdd
    record.wan_bytes = pdd.wan_bytes
    record.handoff_mode = pdd.handoff_mode
    if len(outcome.attempts) > 1:
        record.attempts = list(outcome.attempts)
    if count and outcome.first_token_at is not None:
        record.ttft_s = outcome.first_token_at - outcome.arrival
        if produced > 1 and outcome.last_token_at is not None:
            record.tpot_s = (outcome.last_token_at - outcome.first_token_at) / (produced - 1)


def unroutable_record(request_id: str, context: RecordContext, error: str) -> RequestRecord:
    """The record of a request refused before routing (503: no prefill or no decode agent
    reachable): turned away like a 429, so it is ``rejected`` with its error; it names no
    agent, and is filed under P-MD (a record needs a pipeline; none was chosen)."""
    now = time.time()
    return RequestRecord(
        request_id=request_id, tenant=context.tenant, model=context.model, site=context.site,
        pipeline=Pipeline.P_MD.value, arrival=now, finish=now, api_key_prefix=context.key_prefix,
        role="gateway", agent=context.agent, rejected=True, sla_met=False,
        error=f"unavailable: {error}",
    )  # fmt: skip
