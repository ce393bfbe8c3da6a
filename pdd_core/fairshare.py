"""Processor-sharing flows on one link: ``FairShareLink``, the WAN line of the simulator and of
the data plane's WAN emulator (split from ``transfer.py``, which holds the transfer-time physics
it applies per flow: jitter, slow start, setup and round trip).
"""

from __future__ import annotations

import math
from bisect import insort_right
from collections.abc import Hashable
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from pdd_core.specs import LinkSpec
from pdd_core.transfer import Rng, sample_jitter, slow_start_extra_s
from pdd_core.tuples import new_tuple


class FlowCompletion(NamedTuple):
    """A finished flow: when it started, when its last byte was acknowledged, and its size (a
    named tuple: one per transfer)."""

    flow_id: Hashable
    nbytes: float
    started_s: float
    finished_s: float


@dataclass(slots=True)
class _Flow:
    flow_id: Hashable
    # Order of start on the link (completions at the same instant come out in this order).
    seq: int
    nbytes: float
    started_s: float
    remaining: float
    # Multiplier on the flow's equal share (bandwidth jitter); 1 without jitter.
    factor: float
    # RTT plus jitter delay, paid after the last byte leaves; it uses no bandwidth.
    latency_s: float
    drained_s: float | None = None
    # ``remaining / factor``: the virtual service at which the flow drains (see ``_schedule``).
    target: float = 0.0


_TARGET = attrgetter("target")


class FairShareLink:
    """Processor-sharing flows on one link, as a pure state machine over a ``now`` argument.

    Each flow whose bytes are still in transit gets ``bytes_per_s / n x factor``, where ``n``
    is the number of such flows and ``factor`` its bandwidth-jitter sample; when a flow starts
    or drains, every other flow's completion is recomputed. A flow completes ``latency`` (one RTT,
    its jitter delay, the per-transfer ``setup_s`` and its slow-start ramp) after its last byte
    drains, and that tail uses no bandwidth. Time only
    moves when the caller passes it in: a simulator passes virtual time, the WAN emulator
    passes its clock and sleeps until ``next_completion()``. Cost is O(n) per call (the drain
    order is kept and re-sorted only when it may have changed, and is then nearly sorted), never
    per byte.
    """

    def __init__(
        self,
        link: LinkSpec,
        rng: Rng | None = None,
        *,
        setup_s: float = 0.0,
        initial_window_bytes: float = 0.0,
    ) -> None:
        self.link = link
        self._rng = rng
        self.setup_s = setup_s
        self.initial_window_bytes = initial_window_bytes
        self._flows: dict[Hashable, _Flow] = {}
        # Flows still draining, kept in drain order (by ``target``; re-sorted when it changes).
        self._live: list[_Flow] = []
        self._sorted = True
        # Flows drained and waiting out their latency, in drain order.
        self._drained: dict[Hashable, _Flow] = {}
        self._started = 0
        self._now = 0.0

    @property
    def link(self) -> LinkSpec:
        """The line's spec; setting it is ``set_link`` without bringing the flows to a time."""
        return self._link

    @link.setter
    def link(self, link: LinkSpec) -> None:
        self._link = link
        # ``LinkSpec.bytes_per_s`` is computed on every read; the flow schedule reads it
        # after every event on the line.
        self._bytes_per_s = link.bytes_per_s

    @property
    def now(self) -> float:
        """The latest time the link has been brought to."""
        return self._now

    @property
    def active_flows(self) -> int:
        """Flows whose bytes are still in transit (the ``n`` of the fair share)."""
        return len(self._live)

    def __len__(self) -> int:
        return len(self._flows)

    def __contains__(self, flow_id: object) -> bool:
        return flow_id in self._flows

    def start(self, flow_id: Hashable, nbytes: float, now: float) -> None:
        """Start a flow of ``nbytes`` at ``now``; the other flows' shares shrink from then on.

        Draws the flow's jitter from the link's rng (so the n-th flow of a seeded run always
        gets the same sample). Raises ``ValueError`` for a duplicate id or a negative size.
        """
        if flow_id in self._flows:
            raise ValueError(f"flow_id: flow {flow_id!r} is already on the link")
        if nbytes < 0:
            raise ValueError(f"nbytes: must be non-negative, got {nbytes!r}")
        self._progress(now)
        link = self._link
        jitter = sample_jitter(link, self._rng)
        rtt_s = link.rtt_ms / 1000.0
        # Slow start is charged as latency that uses no bandwidth (the window, not the line,
        # limits it), so rates never sum above the line rate (module docstring).
        ramp = 0.0
        if self.initial_window_bytes > 0:
            rate = self._bytes_per_s * jitter.bandwidth_factor
            ramp = slow_start_extra_s(nbytes, rate, rtt_s, self.initial_window_bytes)
        # Positional, in the fields' order (flow_id, seq, nbytes, started_s, remaining, factor,
        # latency_s): keywords cost more, once per transfer.
        flow = _Flow(
            flow_id,
            self._started,
            nbytes,
            now,
            float(nbytes),
            jitter.bandwidth_factor,
            rtt_s + jitter.delay_s + self.setup_s + ramp,
        )
        self._started += 1
        self._flows[flow_id] = flow
        if nbytes == 0:
            flow.drained_s = now
            self._drained[flow_id] = flow
        else:
            flow.target = flow.remaining / flow.factor
            if self._sorted:
                # Where a stable sort of the list with the flow appended would put it: after
                # every flow of an equal target.
                insort_right(self._live, flow, key=_TARGET)
            else:
                self._live.append(flow)

    def set_link(self, link: LinkSpec, now: float) -> None:
        """Change the line (a degraded or restored WAN) from ``now`` on.

        Bytes moved before ``now`` keep the old bandwidth; every flow's share uses the new one
        from then. Flows already started keep the jitter and RTT they drew at start (the round
        trip of a transfer in flight was fixed when it began); new flows draw from the new spec.
        """
        self._progress(now)
        self.link = link

    def flow(self, flow_id: Hashable) -> FlowCompletion:
        """A flow on the link: its size and start (``finished_s`` is NaN while in flight)."""
        f = self._flows[flow_id]
        # The fields in order (``tuples.new_tuple``): the simulator asks once per cancel.
        return new_tuple(FlowCompletion, (flow_id, f.nbytes, f.started_s, math.nan))

    def cancel(self, flow_id: Hashable, now: float) -> float:
        """Drop a flow (a timed-out or aborted transfer) and return its bytes not yet sent.

        The remaining flows get its share back from ``now``.
        """
        self._progress(now)
        flow = self._flows.pop(flow_id, None)
        if flow is None:
            raise KeyError(flow_id)
        if flow.drained_s is None:
            live = self._live
            del live[next(i for i, f in enumerate(live) if f is flow)]
        else:
            del self._drained[flow_id]
        return flow.remaining

    def finish_times(self) -> dict[Hashable, float]:
        """Completion time of every flow if no other flow starts (by flow id).

        Computed by the same drain schedule ``advance`` applies (see ``_schedule``), with the
        same float operations on the same state, so advancing to a time returned here always
        completes that flow: an event loop never spins on a drain that rounds a hair later.
        """
        result: dict[Hashable, float] = {}
        for fid, f in self._flows.items():
            if f.drained_s is not None:
                result[fid] = f.drained_s + f.latency_s
        drains, _ = self._schedule(math.inf)
        for drained_at, f in drains:
            result[f.flow_id] = drained_at + f.latency_s
        return result

    def next_completion(self) -> tuple[Hashable, float] | None:
        """The flow that completes first and when, or None on an idle link.

        The WAN emulator sleeps until this time; the simulator schedules an event at it. Both
        must call again after any ``start`` or ``cancel``, which moves it.
        """
        # ``finish_times``' values without the dict (the simulator calls this after every
        # event): drains come in time order and latency is never negative, so the scan stops
        # at the first drain no sooner than the best completion found.
        best: tuple[Hashable, float] | None = None
        for fid, f in self._drained.items():
            assert f.drained_s is not None
            done = f.drained_s + f.latency_s
            if best is None or done < best[1]:
                best = (fid, done)
        live = self._live
        if not live:
            return best
        if not self._sorted:
            live.sort(key=_TARGET)
            self._sorted = True
        bandwidth = self._bytes_per_s
        t = self._now
        served = 0.0
        n = len(live)
        for f in live:
            at = t + (f.target - served) * n / bandwidth
            if best is not None and at >= best[1]:
                break
            if best is None or at + f.latency_s < best[1]:
                best = (f.flow_id, at + f.latency_s)
            t, served, n = at, f.target, n - 1
        return best

    def advance(self, now: float) -> list[FlowCompletion]:
        """Bring the link to ``now`` and return the flows completed by then, earliest first.

        Completed flows leave the link. Time must not go backwards.
        """
        self._progress(now)
        done = [
            (f.drained_s + f.latency_s, f.seq, f)
            for f in self._drained.values()
            if f.drained_s is not None and f.drained_s + f.latency_s <= now
        ]
        # Same instant: in the order the flows started (the order of the link's flow table).
        done.sort(key=lambda item: (item[0], item[1]))
        for _, _, f in done:
            del self._flows[f.flow_id]
            del self._drained[f.flow_id]
        # The fields in order (flow_id, nbytes, started_s, finished_s; ``tuples.new_tuple``).
        return [
            new_tuple(FlowCompletion, (f.flow_id, f.nbytes, f.started_s, t)) for t, _, f in done
        ]

    def _schedule(self, until: float) -> tuple[list[tuple[float, _Flow]], float]:
        """Drains due by ``until`` at the current state, and the virtual service by then.

        Processor sharing with per-flow factors: every draining flow advances in a common
        "virtual service" ``V`` with ``dV/dt = bytes_per_s / n(t)`` and sends ``factor x dV``
        bytes, so flow ``i`` drains when ``V`` reaches ``target_i = remaining_i / factor_i``.
        In order of target that gives every drain time in one pass; the order is kept between
        calls and re-sorted (nearly sorted already: O(n)) only after the targets change.
        """
        live = self._live
        if not self._sorted:
            live.sort(key=_TARGET)
            self._sorted = True
        bandwidth = self._bytes_per_s
        t = self._now
        served = 0.0
        n = len(live)
        drains: list[tuple[float, _Flow]] = []
        for f in live:
            at = t + (f.target - served) * n / bandwidth
            if at > until:
                break
            drains.append((at, f))
            t, served, n = at, f.target, n - 1
        if n and math.isfinite(until):
            served += (until - t) * bandwidth / n
        return drains, served

    def _progress(self, now: float) -> None:
        """Bring every flow to ``now``: mark the drains due, charge the others their bytes."""
        if now < self._now:
            raise ValueError(f"now: time went backwards ({now!r} < {self._now!r})")
        drains, served = self._schedule(now)
        if drains:
            drained = self._drained
            for drained_at, f in drains:
                f.remaining = 0.0
                f.drained_s = drained_at
                drained[f.flow_id] = f
            del self._live[: len(drains)]
        if served:
            # The list is in the order of the targets before this update; it stays sorted
            # (and a stable sort would leave it as it is) unless a new target comes out below
            # the one before it, which rounding can do to near-equal targets.
            in_order = self._sorted
            previous = -math.inf
            for f in self._live:
                # Floored at 0: a flow whose drain lies a hair after ``now`` must not go
                # negative (``max(left, 0.0)`` written out: this runs per flow and event).
                factor = f.factor
                left = f.remaining - factor * served
                if left < 0.0:  # noqa: PLR1730
                    left = 0.0
                f.remaining = left
                target = left / factor
                f.target = target
                if target < previous:
                    in_order = False
                previous = target
            self._sorted = in_order
        self._now = now
