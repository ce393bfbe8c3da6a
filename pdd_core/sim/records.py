"""Per-request state while in flight (``Flight``) and the record kept when it ends.

A ``Flight`` is mutable and lives only while the request is in the system; the immutable
``SimulatedRequest`` is what the simulator keeps, so memory grows with the records asked for and
nothing else. Every time in a record is in simulated seconds from the start of the trace.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from pdd_core.metrics import hit_ratio
from pdd_core.routing import HandoffMode, Pipeline
from pdd_core.tuples import new_tuple
from pdd_core.workload import Request


class SimulatedRequest(NamedTuple):
    """What happened to one simulated request, in seconds, tokens and bytes.

    Not the data plane's per-request record (``pdd_core.records.RequestRecord``, what a gateway
    journals and the control plane bills): this is the simulator's own result, with the phases
    a real gateway cannot see (queueing, the transfer that gated the first token, the handoff).

    ``queue_s`` is the wait before prefill started, ``prefill_s`` from then until the last chunk
    ended; ``transfer_s`` the KV transfer that gated the first token (RDMA to D or RLD, or the
    WAN to MD for P-MD), ``handoff_s`` the time from the WAN transfer's end to MD's first token
    of a relayed request. ``tpot_mean_s`` is ``(finish - first token) / (tokens - 1)`` and
    ``longest_stall_s`` the largest gap between two consecutive tokens. ``id_handoffs`` and
    ``kv_handoffs`` count the handoff chunks MD absorbed by recompute from token IDs and by
    receiving their KV over the WAN (whichever was predicted sooner). A rejected request has
    ``rejected=True``, its ``reason``, and NaN times.

    A named tuple, immutable like the frozen dataclass it was and built in about 40% of its
    time: a run makes one per request.
    """

    id: str
    session: str
    tenant: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    pipeline: str
    handoff_mode: str
    hit_tokens_p: int
    hit_tokens_md: int
    miss_tokens: int
    queue_s: float
    prefill_s: float
    transfer_s: float
    handoff_s: float
    ttft_s: float
    tpot_mean_s: float
    longest_stall_s: float
    finish_s: float
    wan_bytes: float
    tokens_rld: int
    tokens_md: int
    rejected: bool
    reason: str
    id_handoffs: int = 0
    kv_handoffs: int = 0

    @property
    def e2e_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def hit_ratio(self) -> float:
        return hit_ratio(self.hit_tokens_p, self.input_tokens)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        return cls._fields


class Flight:
    """Mutable state of one request between its arrival and its record."""

    __slots__ = (
        "absorbed",
        "arrival_s",
        "done",
        "first_token_s",
        "handoff_mode",
        "hit_md",
        "hit_p",
        "id_handoffs",
        "kv_handoffs",
        "last_token_s",
        "max_gap_s",
        "md_first_s",
        "md_index",
        "md_ready",
        "miss",
        "output",
        "pipeline",
        "prefill_end_s",
        "prefill_start_s",
        "relay",
        "relay_index",
        "request",
        "tokens_md",
        "tokens_rld",
        "transfer_s",
        "wan_bytes",
        "wan_done_s",
        "wan_flow",
    )

    def __init__(self, request: Request, pipeline: Pipeline) -> None:
        self.request = request
        self.pipeline = pipeline
        self.arrival_s = request.arrival_s
        # Every completion returns at least one token (the first one decides TTFT).
        self.output = max(1, request.output_tokens)
        self.handoff_mode = HandoffMode.NONE
        self.hit_p = 0
        self.hit_md = 0
        self.miss = request.input_tokens
        self.md_index = -1
        self.relay_index = -1
        self.md_ready = False
        # When MD emitted its first token of a relayed request (the end of the handoff).
        self.md_first_s = math.nan
        self.prefill_start_s = math.nan
        self.prefill_end_s = math.nan
        self.transfer_s = 0.0
        self.wan_done_s = math.nan
        self.wan_bytes = 0.0
        self.wan_flow = -1
        self.first_token_s = math.nan
        self.last_token_s = math.nan
        self.max_gap_s = 0.0
        self.tokens_rld = 0
        self.tokens_md = 0
        self.absorbed = 0
        self.id_handoffs = 0
        self.kv_handoffs = 0
        self.relay: object | None = None
        self.done = False

    def token_at(self, t: float) -> None:
        """Note a token emitted at ``t`` (keeps first token and the longest gap)."""
        if math.isnan(self.first_token_s):
            self.first_token_s = t
        elif t - self.last_token_s > self.max_gap_s:
            self.max_gap_s = t - self.last_token_s
        self.last_token_s = t

    def record(self, finish_s: float) -> SimulatedRequest:
        r = self.request
        tokens = self.tokens_rld + self.tokens_md
        ttft = self.first_token_s - self.arrival_s
        handoff = 0.0
        if (
            self.pipeline is Pipeline.P_RLD_MD
            and self.tokens_md
            and not math.isnan(self.wan_done_s)
        ):
            handoff = max(0.0, self.md_first_s - self.wan_done_s)
        # Every field in ``SimulatedRequest``'s order (``tuples.new_tuple``), once per request.
        # The enums' ``value``: the same text as ``str()`` of them, but one shared string per
        # member instead of a new copy in every record (``str()`` of a ``str`` subclass copies).
        return new_tuple(
            SimulatedRequest,
            (
                r.id,  # id
                r.session or r.id,  # session
                r.tenant,  # tenant
                r.arrival_s,  # arrival_s
                r.input_tokens,  # input_tokens
                tokens,  # output_tokens
                self.pipeline.value,  # pipeline
                self.handoff_mode.value,  # handoff_mode
                self.hit_p,  # hit_tokens_p
                self.hit_md,  # hit_tokens_md
                self.miss,  # miss_tokens
                self.prefill_start_s - self.arrival_s,  # queue_s
                self.prefill_end_s - self.prefill_start_s,  # prefill_s
                self.transfer_s,  # transfer_s
                handoff,  # handoff_s
                ttft,  # ttft_s
                (finish_s - self.first_token_s) / (tokens - 1) if tokens > 1 else 0.0,  # tpot
                self.max_gap_s,  # longest_stall_s
                finish_s,  # finish_s
                self.wan_bytes,  # wan_bytes
                self.tokens_rld,  # tokens_rld
                self.tokens_md,  # tokens_md
                False,  # rejected
                "",  # reason
                self.id_handoffs,  # id_handoffs
                self.kv_handoffs,  # kv_handoffs
            ),
        )


def rejected_record(
    request: Request, pipeline: Pipeline, reason: str, hit_p: int
) -> SimulatedRequest:
    """The record of a request refused at admission (HTTP 429 semantics)."""
    nan = math.nan
    return SimulatedRequest(
        id=request.id,
        session=request.session or request.id,
        tenant=request.tenant,
        arrival_s=request.arrival_s,
        input_tokens=request.input_tokens,
        output_tokens=0,
        pipeline=pipeline.value,
        handoff_mode=HandoffMode.NONE.value,
        hit_tokens_p=hit_p,
        hit_tokens_md=0,
        miss_tokens=request.input_tokens - hit_p,
        queue_s=nan,
        prefill_s=nan,
        transfer_s=nan,
        handoff_s=nan,
        ttft_s=nan,
        tpot_mean_s=nan,
        longest_stall_s=nan,
        finish_s=nan,
        wan_bytes=0.0,
        tokens_rld=0,
        tokens_md=0,
        rejected=True,
        reason=reason,
    )
