"""The routing features of one request, computed the same way by the simulator and the gateway.

``pdd_core.routing`` decides (pipeline, instance, handoff mode, rejection) from *predictions*;
this module is the one place those predictions come from. Both the discrete-event simulator
and the live gateway fill the plain, frozen state below from what they observe and call the same
pure functions, so a planner's thresholds mean the same thing in simulation and live.

Inputs (what each field means, so either side can fill it):

``PrefillState`` (one prefill instance, or a colocated instance, as this request sees it)
    - ``queued_s``: predicted seconds of prefill work already admitted to the instance and not
      yet finished (the sum of each queued request's predicted prefill, including the whole of
      the one in flight). The simulator sums its jobs' estimates; the gateway sums the
      ``prefill_s`` it reserved for requests routed there and not yet prefilled.
    - ``hit_tokens``: this request's prefix hit in that instance's cache, in tokens.
    - ``prefill_s``: predicted seconds of this request's prefill there given that hit
      (``pdd_core.perf.prefill_time`` of the miss over the hit; the caller memoises it).

``DecodeState`` (one decode instance: MD, RLD or a classic D)
    - ``active``: sequences in its running batch; ``max_batch`` the most it runs at once.
    - ``free_kv_tokens``: KV tokens of its pool not allocated to any sequence (paged KV).
    - ``waiting``: sequences waiting for admission ahead of a new one.
    - ``step_s``: duration of its latest decode step (0 when idle or unknown).
    - ``mean_remaining_tokens``: mean tokens still to emit per running sequence (the gateway
      uses each request's ``max_tokens`` minus the tokens it has streamed).
    - ``hit_tokens``: this request's prefix hit in its decode-side radix cache (MD's DRC; 0
      elsewhere).
    - ``kv_capacity_tokens``: its whole KV pool in tokens (0 when unknown: load is then the
      batch slots only).

``LinkState`` (the WAN line to MD, or the RDMA fabric to RLD/D)
    - ``bandwidth_gbps`` and ``rtt_ms``: the line's rate and round trip (``LinkSpec``'s).
    - ``flows``: transfers in transit on it now, not counting the new one (processor sharing
      gives the new one ``1 / (flows + 1)`` of the line).
    - ``setup_ms``: fixed per-transfer setup (block lookup, registration, request message).
    - ``initial_window_bytes``: TCP congestion window a transfer starts with (0: no slow
      start, the connection's window is already open).
    - ``utilisation``: the share of the line's time some transfer was on it over the recent
      past (an exponential average, 0-1; 0 when unknown). Transfers that start later share
      the line too, and under processor sharing a transfer's expected stretch is
      ``1 / (1 - utilisation)`` (Kleinrock's M/G/1-PS result), so the prediction uses the
      larger of that and the current ``flows + 1``.

The states and the ``Prediction`` are named tuples (immutable, and three times cheaper to build
than frozen dataclasses, which matters on the gateway's and the simulator's per-request path).

Outputs: ``Prediction`` holds every feature the router and an operator's record need: P wait,
prefill, MD wait, WAN time, RDMA time, the relay's wait, the predicted TTFT (the first token
comes out of prefill and is emitted once the decoding instance holds the request's KV and has
admitted it, so TTFT = P wait + prefill + transfer to the decoder + its admission wait, with no
decode step), the chosen P, MD and relay (least loaded, ties to the lower index) and the
pipeline decision. The functions allocate only their result and run in O(instances). The
estimates they are built from (``link_s``, ``decode_wait_s``, ``choose_prefill``, ...) are
``pdd_core.estimates``'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from pdd_core.estimates import (
    choose_prefill,
    decode_load,
    decode_wait_s,
    least,
    link_s,
    relay_instead,
)
from pdd_core.routing import (
    InstanceView,
    Pipeline,
    RouteFeatures,
    RoutingTable,
    choose_instance,
    choose_pipeline,
    predict_rejection,
)
from pdd_core.specs import SLA, LinkSpec
from pdd_core.tuples import new_tuple


class PrefillState(NamedTuple):
    """One prefill candidate; see the module docstring for each field."""

    queued_s: float
    hit_tokens: int
    prefill_s: float


class DecodeState(NamedTuple):
    """One decode instance (MD, RLD or D); see the module docstring for each field."""

    active: int
    max_batch: int
    free_kv_tokens: int
    waiting: int = 0
    step_s: float = 0.0
    mean_remaining_tokens: float = 0.0
    hit_tokens: int = 0
    kv_capacity_tokens: int = 0


class LinkState(NamedTuple):
    """A link's rate, round trip and current flows; see the module docstring."""

    bandwidth_gbps: float
    rtt_ms: float
    flows: int = 0
    setup_ms: float = 0.0
    initial_window_bytes: float = 0.0
    utilisation: float = 0.0

    @classmethod
    def of(
        cls,
        link: LinkSpec,
        flows: int = 0,
        *,
        setup_ms: float = 0.0,
        initial_window_bytes: float = 0.0,
        utilisation: float = 0.0,
    ) -> LinkState:
        """The state of ``link`` with ``flows`` transfers in transit."""
        return cls(
            link.bandwidth_gbps, link.rtt_ms, flows, setup_ms, initial_window_bytes, utilisation
        )


class Prediction(NamedTuple):
    """The routing features of one request and the choices made from them.

    Indices point into the sequences passed to ``predict``; ``md_index`` and ``relay_index``
    are -1 where the pipeline uses no such instance (or none was given). ``wan_s`` is the
    predicted WAN transfer to the chosen MD (``inf`` without MD); ``rdma_s`` the RDMA transfer
    to RLD; ``decode_wait_s`` the admission wait at the instance that emits the first token.
    """

    pipeline: Pipeline
    reason: str
    prefill_index: int
    md_index: int
    relay_index: int
    hit_tokens_p: int
    hit_tokens_md: int
    p_wait_s: float
    prefill_s: float
    md_wait_s: float
    wan_s: float
    rdma_s: float
    relay_wait_s: float
    predicted_ttft_s: float
    rejected: bool


def choose_relay(relays: Sequence[DecodeState]) -> int:
    """Index of the least-loaded relay (``decode_load``), ties to the lower index; -1 if none."""
    return least([decode_load(relay) for relay in relays])


RELAY_REASON = "P-MD would miss the TTFT target: relay"


def relay_at_prefill_end(
    elapsed_s: float,
    *,
    input_tokens: int,
    main: DecodeState,
    relays: Sequence[DecodeState],
    wan: LinkState,
    rdma: LinkState | None,
    kv_bytes_per_token: float,
    sla: SLA,
) -> int:
    """The relay a P-MD request should go through instead, checked when its prefill ends; -1
    when P-MD stands.

    The check at arrival (``predict``) saw the line as it was then; by the end of the prefill
    other transfers may have started. This is ``relay_instead`` on the state of that moment:
    ``elapsed_s`` from the request's arrival to now, the WAN transfer of the KV the chosen MD
    (``main``, with its DRC hit) lacks as a new flow on ``wan`` (whose ``flows`` do not count
    this request's), MD's admission wait, and the least-loaded relay's RDMA transfer (0 without
    ``rdma``) and admission wait. The simulator and the gateway both call it, so a request is
    relayed at the end of its prefill on the same numbers on both sides.
    """
    relay_index = choose_relay(relays)
    if relay_index < 0:
        return -1
    hit = min(main.hit_tokens, input_tokens)
    if relay_instead(
        elapsed_s,
        wan_s=link_s(wan, (input_tokens - hit) * kv_bytes_per_token),
        md_wait_s=decode_wait_s(main, input_tokens - hit + 1),
        rdma_s=link_s(rdma, input_tokens * kv_bytes_per_token) if rdma is not None else 0.0,
        relay_wait_s=decode_wait_s(relays[relay_index], input_tokens + 1),
        ttft_target_s=sla.ttft_p90_s,
    ):
        return relay_index
    return -1


def predicted_ttft_s(p_wait_s: float, prefill_s: float, transfer_s: float, wait_s: float) -> float:
    """TTFT as the product defines it: P wait + prefill + transfer to the decoder + its
    admission wait (the first token is sampled at the end of prefill; no decode step)."""
    return p_wait_s + prefill_s + transfer_s + wait_s


def predict(
    *,
    input_tokens: int,
    output_tokens: int,
    prefills: Sequence[PrefillState],
    mains: Sequence[DecodeState],
    relays: Sequence[DecodeState],
    wan: LinkState | None,
    rdma: LinkState | None,
    kv_bytes_per_token: float,
    table: RoutingTable,
    sla: SLA,
) -> Prediction:
    """PDD's routing features and decision for one request (DOMAIN.md section 6).

    P is the candidate that finishes its prefill soonest; MD the one whose admission wait plus
    WAN transfer of the KV it lacks is smallest (``routing.choose_instance``); the pipeline is
    ``routing.choose_pipeline``'s, fed the transfer plus MD's admission wait, except that a
    P-MD whose predicted TTFT misses ``sla.ttft_p90_s`` while the relay path would be sooner
    is relayed (DOMAIN.md section 6: P-MD when prefill plus transfer fits the TTFT target);
    the relay is the least loaded. Without MD (none reachable) the pipeline is P-RLD. The
    request is rejected when its predicted TTFT breaks the SLA (``routing.predict_rejection``).
    """
    p_index = choose_prefill(prefills)
    p = prefills[p_index]
    md_index, md_hit, md_wait, wan_s = -1, 0, 0.0, math.inf
    if mains and wan is not None:
        views = []
        for index, md in enumerate(mains):
            hit = min(md.hit_tokens, input_tokens)
            # The DRC's prefix pages are shared, so only the rest needs new KV pages.
            wait = decode_wait_s(md, input_tokens - hit + 1)
            transfer = link_s(wan, (input_tokens - hit) * kv_bytes_per_token)
            views.append(new_tuple(InstanceView, (index, hit, wait, transfer)))
        chosen = choose_instance(views)
        md_index, md_hit = chosen.index, chosen.cached_tokens
        md_wait, wan_s = chosen.queue_s, chosen.service_s
    # What P-MD adds to TTFT beyond prefill is the transfer plus MD's admission wait, so the
    # router's budget is checked against both: a congested MD sends requests to the relay.
    features = new_tuple(
        RouteFeatures, (input_tokens, p.hit_tokens, md_hit, output_tokens, wan_s + md_wait)
    )
    if md_index < 0:
        pipeline, reason = Pipeline.P_RLD, "no main decode reachable: relay finishes it"
    else:
        decision = choose_pipeline(features, table)
        pipeline, reason = decision.pipeline, decision.reason
    relay_index, relay_wait, rdma_s = -1, 0.0, 0.0
    if pipeline is not Pipeline.P_MD or relays:
        relay_index = choose_relay(relays)
        if relay_index >= 0:
            relay_wait = decode_wait_s(relays[relay_index], input_tokens + 1)
        if rdma is not None:
            rdma_s = link_s(rdma, input_tokens * kv_bytes_per_token)
    ttft = predicted_ttft_s(p.queued_s, p.prefill_s, rdma_s, relay_wait)
    if pipeline is Pipeline.P_MD:
        direct = predicted_ttft_s(p.queued_s, p.prefill_s, wan_s, md_wait)
        before = p.queued_s + p.prefill_s
        if relay_index >= 0 and relay_instead(
            before,
            wan_s=wan_s,
            md_wait_s=md_wait,
            rdma_s=rdma_s,
            relay_wait_s=relay_wait,
            ttft_target_s=sla.ttft_p90_s,
        ):
            pipeline, reason = Pipeline.P_RLD_MD, RELAY_REASON
        else:
            ttft, relay_index, relay_wait, rdma_s = direct, -1, 0.0, 0.0
    # In the fields' order (``tuples.new_tuple``), once per request.
    return new_tuple(
        Prediction,
        (
            pipeline,
            reason,
            p_index,
            md_index,
            relay_index,
            p.hit_tokens,
            md_hit,
            p.queued_s,
            p.prefill_s,
            md_wait,
            wan_s,
            rdma_s,
            relay_wait,
            ttft,
            predict_rejection(ttft, sla, table),
        ),
    )
