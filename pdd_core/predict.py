"""The routing features of one request, computed the same way by the simulator and the gateway.

``pdd_core.routing`` decides (pipeline, instance, handoff mode, rejection) from *predictions*;
this module is the one place those predictions come from. Both the discrete-event simulator
and the live gateway fill the plain, frozen state of ``pdd_core.estimates`` from what they
observe and call the same pure functions, so a planner's thresholds mean the same thing in
simulation and live.

Inputs: ``PrefillState``, ``DecodeState`` and ``LinkState``, with what each field means, are
``pdd_core.estimates``' (handed on here, with ``predict``, to the simulator and the gateway). The
``Prediction`` is a named tuple like them (immutable, and three times cheaper to build than a
frozen dataclass, which matters on the gateway's and the simulator's per-request path).

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
    DecodeState,
    LinkState,
    PrefillState,
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
from pdd_core.specs import SLA
from pdd_core.tuples import new_tuple

# The states are estimates', handed on with ``predict`` (the simulator and the gateway take
# them from here).
__all__ = [
    "RELAY_REASON",
    "DecodeState",
    "LinkState",
    "Prediction",
    "PrefillState",
    "choose_relay",
    "predict",
    "predicted_ttft_s",
    "relay_at_prefill_end",
]


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


def _choose_main(
    input_tokens: int, mains: Sequence[DecodeState], wan: LinkState | None, kv_bytes: float
) -> tuple[int, int, float, float]:
    """(index, cached tokens, admission wait, WAN transfer) of the MD ``choose_instance``
    picks; (-1, 0, 0, inf) when none is reachable."""
    if not mains or wan is None:
        return -1, 0, 0.0, math.inf
    views = []
    for index, md in enumerate(mains):
        hit = min(md.hit_tokens, input_tokens)
        # The DRC's prefix pages are shared, so only the rest needs new KV pages.
        wait = decode_wait_s(md, input_tokens - hit + 1)
        transfer = link_s(wan, (input_tokens - hit) * kv_bytes)
        views.append(new_tuple(InstanceView, (index, hit, wait, transfer)))
    chosen = choose_instance(views)
    return chosen.index, chosen.cached_tokens, chosen.queue_s, chosen.service_s


def _relay_path(
    input_tokens: int, relays: Sequence[DecodeState], rdma: LinkState | None, kv_bytes: float
) -> tuple[int, float, float]:
    """(index, admission wait, RDMA transfer of the whole KV) of the least loaded RLD; index
    -1 (no wait) when there is none."""
    relay_index, relay_wait, rdma_s = choose_relay(relays), 0.0, 0.0
    if relay_index >= 0:
        relay_wait = decode_wait_s(relays[relay_index], input_tokens + 1)
    if rdma is not None:
        rdma_s = link_s(rdma, input_tokens * kv_bytes)
    return relay_index, relay_wait, rdma_s


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
    md_index, md_hit, md_wait, wan_s = _choose_main(input_tokens, mains, wan, kv_bytes_per_token)
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
        relay_index, relay_wait, rdma_s = _relay_path(
            input_tokens, relays, rdma, kv_bytes_per_token
        )
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
