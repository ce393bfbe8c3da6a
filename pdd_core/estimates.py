"""The estimates ``pdd_core.predict`` builds its routing features from (split from it).

A link's jitter-free transfer time at its current share, a decoder's occupancy and admission
wait, the soonest-finishing prefill and the least-loaded instance, and the two comparisons made
after arrival (ship a handoff's KV or recompute it; relay a P-MD request or not). They take
``predict``'s plain states (its module docstring says what each field means) or plain numbers,
so the simulator and the gateway compute them the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pdd_core.transfer import ideal_transfer_s

if TYPE_CHECKING:  # the states are predict's, and predict imports this module
    from pdd_core.predict import DecodeState, LinkState, PrefillState

# Utilisation is capped here: a line busy all the time still finishes a transfer (20x stretch).
MAX_UTILISATION = 0.95


def link_s(link: LinkState, nbytes: float) -> float:
    """Jitter-free seconds to move ``nbytes`` as a new flow on ``link`` at its current share.

    Fair share among ``flows + 1`` flows, plus setup, TCP slow start (when an initial window
    is given) and one round trip: ``pdd_core.transfer.ideal_transfer_s``, the same formula the
    simulated and emulated lines follow.
    """
    flows = float(link.flows + 1)
    utilisation = link.utilisation
    if utilisation > 0:
        # ``max(flows, 1 / (1 - min(utilisation, MAX_UTILISATION)))`` written as comparisons
        # with the same results: the predictor calls this several times per request.
        if utilisation > MAX_UTILISATION:  # noqa: PLR1730
            utilisation = MAX_UTILISATION
        busy = 1.0 / (1.0 - utilisation)
        if busy > flows:  # noqa: PLR1730
            flows = busy
    return ideal_transfer_s(
        nbytes,
        link.bandwidth_gbps * 1.25e8,
        link.rtt_ms / 1000.0,
        flows=flows,
        setup_s=link.setup_ms / 1000.0,
        initial_window_bytes=link.initial_window_bytes,
    )


def occupancy(
    active: int, waiting: int, max_batch: int, free_kv_tokens: int, kv_capacity_tokens: int
) -> float:
    """``decode_load`` from plain numbers (for callers that hold them without a state)."""
    if max_batch <= 0:
        return 1.0
    slots = (active + waiting) / max_batch
    if kv_capacity_tokens > 0:
        slots = max(slots, 1.0 - free_kv_tokens / kv_capacity_tokens)
    return min(1.0, slots)


def decode_load(state: DecodeState) -> float:
    """Occupancy in [0, 1]: the higher of running plus waiting sequences over the batch limit
    and the share of the KV pool in use (``routing.choose_handoff_mode``'s ``rld_load``)."""
    return occupancy(
        state.active,
        state.waiting,
        state.max_batch,
        state.free_kv_tokens,
        state.kv_capacity_tokens,
    )


def least(values: Sequence[float]) -> int:
    """Index of the smallest value, ties to the lower index; -1 for none."""
    best = -1
    best_value = math.inf
    for index, value in enumerate(values):
        if value < best_value:
            best, best_value = index, value
    return best


def decode_wait_s(state: DecodeState, need_tokens: int) -> float:
    """Predicted wait before a sequence needing ``need_tokens`` of KV joins the batch.

    Zero when nothing waits, a slot is free and the pool holds its KV now. Otherwise one
    running sequence finishes every ``step_s x mean_remaining_tokens / active`` seconds on
    average, and the new one is behind ``waiting`` others: ``(waiting + 1)`` such intervals.
    """
    if (
        state.waiting == 0
        and state.active < state.max_batch
        and need_tokens <= state.free_kv_tokens
    ):
        return 0.0
    if state.active <= 0:
        return 0.0
    return (state.waiting + 1) * state.mean_remaining_tokens * state.step_s / state.active


def choose_prefill(prefills: Sequence[PrefillState]) -> int:
    """The prefill candidate that finishes this request's prefill soonest (queue + prefill),
    ties to the larger hit then the lower index: ``routing.choose_instance``'s rule."""
    if not prefills:
        raise ValueError("prefills: need at least one prefill instance")
    best, best_finish, best_hit = 0, math.inf, -1
    for index, p in enumerate(prefills):
        finish = p.queued_s + p.prefill_s
        if finish < best_finish or (finish == best_finish and p.hit_tokens > best_hit):
            best, best_finish, best_hit = index, finish, p.hit_tokens
    return best


def ship_kv_instead(extend_s: float, ship_s: float) -> bool:
    """Token-ID handoff or ship-the-KV, from the numbers of the moment (DOMAIN.md section 4).

    ``extend_s`` is MD's predicted extend (recompute) of the handed-over tokens
    (``perf.extend_time``, which follows the model's real attention, MLA included) plus any
    queue before it; ``ship_s`` the predicted WAN transfer of their KV (``link_s``: the line's
    share, round trip, setup and slow start). True when shipping is sooner. Jitter is left out
    of both, so a shipped chunk can come out later than predicted while an extend rarely does.
    """
    return ship_s < extend_s


def relay_instead(
    elapsed_s: float,
    *,
    wan_s: float,
    md_wait_s: float,
    rdma_s: float,
    relay_wait_s: float,
    ttft_target_s: float,
) -> bool:
    """Whether a request routed P-MD should go through the relay instead.

    DOMAIN.md section 6 sends a request P-MD when prefill plus the transfer fits the TTFT
    target. ``elapsed_s`` is the time from arrival to the end of prefill (predicted at
    arrival, or measured when the KV is ready: the caller may check again then, with the line's
    flows at that moment). True when the direct path misses ``ttft_target_s`` and the relay
    path would emit the first token sooner.
    """
    direct = elapsed_s + wan_s + md_wait_s
    return direct > ttft_target_s and elapsed_s + rdma_s + relay_wait_s < direct
