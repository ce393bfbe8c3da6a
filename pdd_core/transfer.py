"""Time to move KV over a link, alone or sharing the link with other flows.

DOMAIN.md section 5 models a request's WAN transfer as ``L_new kv_B / B + k RTT`` where ``B`` is
the request's fair share of the line among concurrent flows (processor sharing), and the line has
jitter. The discrete-event simulator (virtual time) and the data plane's WAN emulator (wall-clock
time) both use this module, so a simulated TTFT and an emulated one come from the same model.

Protocol assumptions, stated once:

- One RTT per transfer: the receiver asks for the blocks it lacks and learns of completion from
  the sender's acknowledgement. A fixed per-transfer ``setup_s`` (block lookup, memory
  registration, the request message) is added on top; it uses no bandwidth.
- TCP slow start (``initial_window_bytes`` > 0): the sender's window starts at that size and
  doubles every RTT until it covers the line's bandwidth-delay product (where slow start ends
  on the path's first loss or ``ssthresh``); a transfer pays ``sum over its full slow-start
  rounds of (RTT - window / line rate)`` on top of ``bytes / share``
  (``slow_start_extra_s``), as latency that uses no bandwidth. Charging it at the line rate
  rather than the flow's momentary share keeps a faster line from ever finishing any flow
  later (a property test holds the flow model to that). With 0 the connection's window is
  already open (a long-lived connection with ``tcp_slow_start_after_idle`` off), as before.
- Jitter (``LinkSpec.jitter_ms``, ``LinkSpec.bandwidth_jitter``) is drawn once per transfer and
  is heavy-tailed, as measured WAN delay and throughput are: an extra delay from a Lomax
  (Pareto II) law of shape ``JITTER_SHAPE`` with mean ``jitter_ms``, and a bandwidth factor
  ``1 / (1 + X)`` with ``X`` Lomax of the same shape and mean ``bandwidth_jitter``, floored at
  ``MIN_BANDWIDTH_FACTOR``. The factor never exceeds 1, so jittered flows never take more than
  their equal share and the sum of flow rates never exceeds the line rate.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from pdd_core.specs import LinkSpec
from pdd_core.tuples import new_tuple

# RFC 6928 initial congestion window: 10 segments of a 1,460-byte MSS (1,500-byte Ethernet MTU
# less 40 bytes of IPv4 and TCP headers), Linux's default since 2.6.39.
IW10_BYTES = 10 * 1460.0
# Linux restarts an idle connection's window from the initial one (tcp_slow_start_after_idle = 1,
# RFC 2861 / RFC 7661) once it has been idle longer than its retransmission timeout, which is at
# least TCP_RTO_MIN (200 ms, include/net/tcp.h).
TCP_RTO_MIN_S = 0.2

# Lower clip of the bandwidth factor: a transfer never stalls completely (a stalled TCP flow is
# a timeout, which the agents handle, not a bandwidth sample).
MIN_BANDWIDTH_FACTOR = 0.1

# Shape of the Lomax (Pareto II) laws of jitter: finite mean and variance, a polynomial tail
# (P(X > x) ~ x^-3), the "heavy tail" WAN measurements report rather than a normal's.
JITTER_SHAPE = 3.0


class JitterDraws:
    """The jitter draws of one numpy ``Generator``, fetched ``block`` at a time.

    Every jitter draw is ``pareto(JITTER_SHAPE)``, and ``Generator.pareto(a, size=n)`` gives
    the values of ``n`` single draws in the same order (``tests/pdd_core/test_transfer.py``
    holds it), so a simulator whose every draw goes through one of these gets the numbers it
    got drawing one at a time, without a numpy call per transfer. Nothing else may draw from
    the generator.
    """

    __slots__ = ("_block", "_buffer", "_rng")

    def __init__(self, rng: np.random.Generator, block: int = 256) -> None:
        self._rng = rng
        self._block = block
        self._buffer: list[float] = []  # the next draws, the next one last

    def pareto(self) -> float:
        """The next ``pareto(JITTER_SHAPE)`` draw of the generator."""
        buffer = self._buffer
        if not buffer:
            buffer.extend(reversed(self._rng.pareto(JITTER_SHAPE, size=self._block).tolist()))
        return buffer.pop()


Rng = np.random.Generator | random.Random | JitterDraws


class JitterSample(NamedTuple):
    """The jitter one transfer sees: an extra delay and a multiplier on its bandwidth share (a
    named tuple: one per transfer)."""

    delay_s: float = 0.0
    bandwidth_factor: float = 1.0


NO_JITTER = JitterSample()


def sample_jitter(link: LinkSpec, rng: Rng | None) -> JitterSample:
    """Draw one transfer's jitter from the link's spreads (none without an rng or a spread).

    See the module docstring for the laws. Draws happen in a fixed order (delay, then factor),
    and only for non-zero spreads, so a seeded rng reproduces a run.
    """
    if rng is None:
        return NO_JITTER
    delay_s = 0.0
    if link.jitter_ms > 0:
        delay_s = _lomax(rng, link.jitter_ms) / 1000.0
    factor = 1.0
    if link.bandwidth_jitter > 0:
        factor = max(1.0 / (1.0 + _lomax(rng, link.bandwidth_jitter)), MIN_BANDWIDTH_FACTOR)
    # The fields in order (delay_s, bandwidth_factor; ``tuples.new_tuple``), per transfer.
    return new_tuple(JitterSample, (delay_s, factor))


def slow_start_extra_s(
    nbytes: float, share_bytes_per_s: float, rtt_s: float, initial_window_bytes: float
) -> float:
    """Seconds TCP slow start adds to a transfer of ``nbytes`` at ``share_bytes_per_s``.

    Each round trip the window (from ``initial_window_bytes``, doubling) sends one window and
    waits for its acknowledgements: while the window is below the share's bandwidth-delay
    product and does not finish the transfer, a round costs ``rtt`` where the share would have
    sent it in ``window / share``. The rest goes at the share (the last window's bytes arrive
    within the transfer's final round trip, counted by the caller). Zero without a window, a
    round trip or bytes. More bandwidth never makes the total longer: an extra round it adds
    replaces bytes the slower share took at least a round trip to send.
    """
    if initial_window_bytes <= 0 or rtt_s <= 0 or nbytes <= 0 or share_bytes_per_s <= 0:
        return 0.0
    bdp = share_bytes_per_s * rtt_s
    window = initial_window_bytes
    sent = 0.0
    extra = 0.0
    while window < bdp and sent + window < nbytes:
        extra += rtt_s - window / share_bytes_per_s
        sent += window
        window *= 2.0
    return extra


@lru_cache(maxsize=256)
def _slow_start_rounds(
    share_bytes_per_s: float, rtt_s: float, initial_window_bytes: float
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``slow_start_extra_s``'s rounds at one share, laid out once: before each round that
    fits under the bandwidth-delay product, the bytes a transfer must exceed to pay it
    (``sent + window``), and the extra seconds after each number of rounds (0 first).

    The same float operations in the same order as the loop, so a lookup gives its bits.
    """
    bdp = share_bytes_per_s * rtt_s
    window = initial_window_bytes
    sent = 0.0
    extra = 0.0
    thresholds: list[float] = []
    extras = [extra]
    while window < bdp:
        thresholds.append(sent + window)
        extra += rtt_s - window / share_bytes_per_s
        extras.append(extra)
        sent += window
        window *= 2.0
    return tuple(thresholds), tuple(extras)


def slow_start_extra_at_line_s(
    nbytes: float, bytes_per_s: float, rtt_s: float, initial_window_bytes: float
) -> float:
    """``slow_start_extra_s`` for callers whose share is a line's fixed rate (the router's
    predictor, several times per request): the rounds are computed once per line and a
    transfer's are found by bisection, with the loop's exact result. A jittered share takes
    a new value per transfer and goes through the loop instead."""
    if initial_window_bytes <= 0 or rtt_s <= 0 or nbytes <= 0 or bytes_per_s <= 0:
        return 0.0
    thresholds, extras = _slow_start_rounds(bytes_per_s, rtt_s, initial_window_bytes)
    # The loop pays round i while ``sent + window < nbytes``; the thresholds increase, so
    # the rounds paid are those below ``nbytes``.
    return extras[bisect_left(thresholds, nbytes)]


def slow_start_extra_array(
    nbytes: np.ndarray, share_bytes_per_s: float, rtt_s: float, initial_window_bytes: float
) -> np.ndarray:
    """``slow_start_extra_s`` of every transfer size in ``nbytes`` at one share (the planner's
    analytic model over a sampled workload). The window's rounds do not depend on the size, so
    one pass over the rounds serves every size; a test holds it to the scalar form."""
    extra = np.zeros(np.shape(nbytes), dtype=float)
    if initial_window_bytes <= 0 or rtt_s <= 0 or share_bytes_per_s <= 0:
        return extra
    bdp = share_bytes_per_s * rtt_s
    window = initial_window_bytes
    sent = 0.0
    while window < bdp:
        pending = sent + window < nbytes
        if not pending.any():
            break
        extra += np.where(pending, rtt_s - window / share_bytes_per_s, 0.0)
        sent += window
        window *= 2.0
    return extra


def ideal_transfer_s(
    nbytes: float,
    bytes_per_s: float,
    rtt_s: float,
    *,
    flows: float = 1,
    setup_s: float = 0.0,
    initial_window_bytes: float = 0.0,
) -> float:
    """Jitter-free seconds to move ``nbytes`` at ``1 / flows`` of ``bytes_per_s``.

    ``setup + bytes / share + slow-start extra + RTT`` (see the module docstring): plain
    numbers in and out, so the router's predictor (``pdd_core.predict``) calls it directly.
    """
    # Without a window slow start adds 0.0 (its own first check), so the call is skipped:
    # the router's predictor runs this several times per request.
    extra = (
        slow_start_extra_at_line_s(nbytes, bytes_per_s, rtt_s, initial_window_bytes)
        if initial_window_bytes > 0
        else 0.0
    )
    return setup_s + nbytes * flows / bytes_per_s + extra + rtt_s


def transfer_time(
    link: LinkSpec,
    nbytes: float,
    rng: Rng | None = None,
    *,
    flows: int = 1,
    setup_s: float = 0.0,
    initial_window_bytes: float = 0.0,
) -> float:
    """Seconds to move ``nbytes`` over ``link`` while ``flows`` flows share it equally.

    ``ideal_transfer_s`` at the share times the jitter's bandwidth factor, plus the jitter's
    delay (DOMAIN.md section 5 with ``k = 1``). It assumes the flow count stays fixed for the
    whole transfer; when flows come and go, use ``pdd_core.fairshare.FairShareLink``. A
    zero-byte transfer still pays the round trip and the setup.
    """
    if nbytes < 0:
        raise ValueError(f"nbytes: must be non-negative, got {nbytes!r}")
    if flows < 1:
        raise ValueError(f"flows: must be at least 1, got {flows!r}")
    jitter = sample_jitter(link, rng)
    rate = link.bytes_per_s * jitter.bandwidth_factor
    rtt_s = link.rtt_ms / 1000.0
    return (
        setup_s
        + nbytes * flows / rate
        + slow_start_extra_s(nbytes, rate, rtt_s, initial_window_bytes)
        + rtt_s
        + jitter.delay_s
    )


def _lomax(rng: Rng, mean: float) -> float:
    """A Lomax (Pareto II) draw of shape ``JITTER_SHAPE`` scaled to the given mean."""
    scale = mean * (JITTER_SHAPE - 1.0)
    if isinstance(rng, JitterDraws):  # numpy's ``pareto`` is the Lomax law already
        return scale * rng.pareto()
    if isinstance(rng, random.Random):
        return scale * (rng.paretovariate(JITTER_SHAPE) - 1.0)
    return scale * float(rng.pareto(JITTER_SHAPE))
