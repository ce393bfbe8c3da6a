"""The state ``pdd_core.predict`` takes, and the estimates it builds its routing features from.

The discrete-event simulator and the live gateway fill the plain, frozen states below from what
they observe; the estimates (split from ``predict``) are pure functions of them or of plain
numbers, so both sides compute them the same way: a link's jitter-free transfer time at its
current share, a decoder's occupancy and admission wait, the soonest-finishing prefill and the
least-loaded instance, and the two comparisons made after arrival (ship a handoff's KV or
recompute it; relay a P-MD request or not).

What each field means, so either side can fill it:

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

The states are named tuples (immutable, and three times cheaper to build than frozen dataclasses,
which matters on the gateway's and the simulator's per-request path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from pdd_core.specs import LinkSpec
from pdd_core.transfer import ideal_transfer_s

# Utilisation is capped here: a line busy all the time still finishes a transfer (20x stretch).
MAX_UTILISATION = 0.95


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
