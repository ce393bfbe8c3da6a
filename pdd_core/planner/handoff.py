"""Handoff thresholds of the routing table, derived from the extend cost and the line.

DOMAIN.md section 4: after the WAN copy lands, RLD hands its eager tokens to MD as token IDs and
MD recomputes their KV in an *extend* pass. The data-plane measurements agree with ``perf``: at a
64K context a 100-token extend costs tens to a couple of hundred milliseconds depending on the
chip, while shipping those tokens' KV (100 x ~50 KB = 5 MB) over an idle 20 Gbps, 20 ms line
costs 22 ms on a warm connection but 180.5 ms from TCP's initial window (the simulator's
default, ``SimConfig.wan_initial_window_bytes``: eight extra round trips of slow start; issue
#25 quotes a public measurement of that handoff at 185 ms mean). So token-ID handoff beats
shipping KV on a cold line, and on a warm one once the line is contended (its fair share
shrinks with the number of concurrent flows) - which is when a shipped tail would be jittery.
The thresholds below follow from that arithmetic:

- ``handoff_chunk_tokens``: the largest power of two whose extend at the mean context fits in
  one TPOT budget (the stall of absorbing one chunk is then no worse than a slow step);
- ``extend_decode_min_tokens``: the same size - at or below one chunk a one-shot handoff is
  already a single invisible stall;
- ``rld_load_threshold``: extend-decode keeps RLD decoding while MD catches up, adding that
  catch-up time to each relay's occupancy; above ``MAX_UTILISATION / (1 + extra)`` the extra would
  overflow RLD, so the router switches to one-shot there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pdd_core import perf
from pdd_core.planner.capacity import MAX_UTILISATION, Evaluator
from pdd_core.planner.design import Design
from pdd_core.routing import RoutingTable
from pdd_core.transfer import ideal_transfer_s


@dataclass(frozen=True, slots=True)
class HandoffChoice:
    """The derived thresholds and the figures behind them (for the plan's reasons)."""

    table: RoutingTable
    context: int
    extend_100_s: float
    ship_100_idle_s: float
    flows_to_break_even: float
    reason: str


def idle_wan_s(ev: Evaluator, nbytes: float) -> float:
    """Seconds to ship ``nbytes`` alone on the plan's WAN line, as the simulator's line does:
    setup, slow start from the configured initial window, the bytes, one round trip."""
    assert ev.wan is not None
    return ideal_transfer_s(
        nbytes,
        ev.wan.bytes_per_s,
        ev.wan.rtt_ms / 1000.0,
        setup_s=ev.config.wan_setup_ms / 1000.0,
        initial_window_bytes=ev.config.wan_initial_window_bytes,
    )


def choose_handoff(ev: Evaluator, design: Design, relay_utilisation: float) -> HandoffChoice:
    """Derive the handoff thresholds for ``design`` (see the module docstring)."""
    md = design.decode
    chip = ev.chips[md.chip]
    p = ev.profile
    context = int(np.mean(p.input_tokens))
    budget = ev.sla.tpot_p90_s
    chunk = 16
    while chunk < 512:
        nxt = chunk * 2
        if perf.extend_time(ev.model, chip, nxt, context, md.shape).seconds > budget:
            break
        chunk = nxt
    extend_chunk = perf.extend_time(ev.model, chip, chunk, context, md.shape).seconds
    extend_100 = perf.extend_time(ev.model, chip, 100, context, md.shape).seconds
    ship_100 = math.inf
    break_even = math.inf
    if ev.wan is not None:
        nbytes = perf.kv_bytes(ev.model, 100)
        ship_100 = idle_wan_s(ev, nbytes)
        per_flow = nbytes / ev.wan.bytes_per_s
        # Shipping among n flows costs its fixed part (setup, slow start at the line rate, the
        # round trip) plus n times the bytes at the line rate.
        spare = extend_100 - (ship_100 - per_flow)
        break_even = spare / per_flow if per_flow > 0 and spare > 0 else 1.0
    # Extend-decode's extra RLD time per relay: the eager tokens are absorbed a chunk at a time.
    rld_step = 0.0
    if design.relay is not None:
        _, rld_step, _ = ev.decode_batch(design.relay.chip, design.relay.shape, drc=False)
    eager = 0.0
    if rld_step > 0 and ev.wan is not None:
        typical_wan = float(np.median(p.miss_tokens)) * ev.model.kv_bytes_per_token
        eager = idle_wan_s(ev, typical_wan) / rld_step
    chunks = max(1.0, eager / chunk)
    occupancy = eager * rld_step if eager else 1.0
    extra = chunks * extend_chunk / max(occupancy, 1e-9)
    threshold = min(0.95, max(0.3, MAX_UTILISATION / (1.0 + extra)))
    table = replace(
        design.table,
        handoff_chunk_tokens=chunk,
        extend_decode_min_tokens=chunk,
        rld_load_threshold=round(threshold, 2),
    )
    reason = (
        f"handoff: at the mean context ({context:,} tokens) MD ({md.chip}, "
        f"{md.shape.label()}) extends {chunk} tokens in {extend_chunk * 1e3:.0f} ms, "
        "within one TPOT budget "
        f"({budget * 1e3:.0f} ms), so chunks are {chunk} tokens and one-shot is used up to "
        f"{chunk}; a 100-token extend costs {extend_100 * 1e3:.0f} ms while shipping their KV "
        f"costs {ship_100 * 1e3:.0f} ms on an idle line, so token-ID handoff wins once about "
        f"{break_even:.0f} flows share the line (it is jitter-free, which is why it is used); "
        f"extend-decode adds about {extra:.0%} to a relay's RLD time, so above "
        f"{threshold:.0%} RLD load the router hands off one-shot (planned RLD load "
        f"{relay_utilisation:.0%})."
    )
    return HandoffChoice(table, context, extend_100, ship_100, break_even, reason)
