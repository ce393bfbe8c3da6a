"""A WAN line inside the event loop: ``fairshare.FairShareLink`` plus completion callbacks.

The flow model (processor sharing with per-transfer jitter) is the physics module's; this
adapter only turns its ``next_completion`` into a scheduled event, calls back the owner of each
finished flow, and bins the bytes over time for utilisation (each flow's bytes are spread evenly
over its lifetime, which is exact for a lone flow and an average under sharing, so a bin is
clipped to the line rate: spreading cannot create bandwidth the line does not have). It also
keeps the line's busy time (some flow on it), so mean Gbps can be stated over the busy span,
and cancels the flows of requests that no longer need them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from pdd_core.fairshare import FairShareLink
from pdd_core.sim.instance import Host
from pdd_core.specs import LinkSpec
from pdd_core.transfer import Rng


class WanLine:
    """One WAN link of the simulated topology."""

    def __init__(
        self,
        host: Host,
        spec: LinkSpec,
        rng: Rng,
        bin_s: float,
        *,
        setup_s: float = 0.0,
        initial_window_bytes: float = 0.0,
        load_window_s: float = 10.0,
    ) -> None:
        self.host = host
        self._schedule = host.schedule  # read once: every change on the line reschedules
        self.spec = spec
        self.link = FairShareLink(
            spec, rng, setup_s=setup_s, initial_window_bytes=initial_window_bytes
        )
        self.bin_s = bin_s
        self.bins: dict[int, float] = {}
        self.total_bytes = 0.0
        self.busy_s = 0.0
        self.cancelled = 0
        self._busy_since = 0.0
        self._ewma = 0.0
        self._ewma_at = 0.0
        self._busy = False
        self.load_window_s = load_window_s
        self._callbacks: dict[int, Callable[[float], None]] = {}
        self._ids = itertools.count()
        self._version = 0

    def utilisation(self, now: float) -> float:
        """Share of the recent past (an exponential average over ``load_window_s``) during
        which some transfer was on the line: ``predict.LinkState.utilisation``."""
        busy = 1.0 if self._busy else 0.0
        decay = math.exp(-(now - self._ewma_at) / self.load_window_s)
        return self._ewma * decay + busy * (1.0 - decay)

    def _mark(self, now: float) -> None:
        self._ewma = self.utilisation(now)
        self._ewma_at = now

    def start(self, nbytes: float, now: float, on_done: Callable[[float], None]) -> int:
        """Start a transfer; returns its flow id (for ``cancel``)."""
        flow = next(self._ids)
        self._mark(now)
        self._busy = True
        if not self._callbacks:
            self._busy_since = now
        self.link.start(flow, nbytes, now)
        self._callbacks[flow] = on_done
        self._reschedule(now)
        return flow

    def cancel(self, flow: int, now: float) -> float | None:
        """Drop a transfer nobody needs any more (its request finished on RLD).

        Returns the bytes it had sent, which are accounted; the rest never use the line.
        Unknown or finished flows are ignored (None).
        """
        if self._callbacks.pop(flow, None) is None:
            return None
        record = self.link.flow(flow)
        sent = record.nbytes - self.link.cancel(flow, now)
        self.cancelled += 1
        self._account(sent, record.started_s, now)
        self._idle_check(now)
        self._reschedule(now)
        return sent

    def _idle_check(self, now: float) -> None:
        if not self._callbacks:
            self.busy_s += now - self._busy_since
            self._mark(now)
            self._busy = False

    def _reschedule(self, now: float) -> None:
        self._version += 1
        nxt = self.link.next_completion()
        if nxt is None:
            return
        version = self._version
        # Never schedule into the past: float rounding can put a drain a hair before ``now``.
        at = nxt[1]
        if now > at:  # noqa: PLR1730 - ``max`` written out, a call less per event on the line
            at = now
        self._schedule(at, lambda: self._fire(version, at))

    def _fire(self, version: int, t: float) -> None:
        if version != self._version:
            return
        done = self.link.advance(t)
        if not done:
            # The drain time rounded below its computed value: nudge and try again.
            self._version += 1
            nudged = self._version
            self._schedule(t + 1e-9, lambda: self._fire(nudged, t + 1e-9))
            return
        for completion in done:
            self._account(completion.nbytes, completion.started_s, completion.finished_s)
            callback = self._callbacks.pop(int(completion.flow_id))  # type: ignore[call-overload]
            self._idle_check(completion.finished_s)
            callback(completion.finished_s)
        self._reschedule(t)

    def _account(self, nbytes: float, start: float, end: float) -> None:
        self.total_bytes += nbytes
        if nbytes <= 0:
            return
        width = self.bin_s
        first, last = int(start // width), int(end // width)
        if first == last:  # the whole flow in one bin
            self.bins[first] = self.bins.get(first, 0.0) + nbytes * 1.0
            return
        span = max(end - start, 1e-12)
        for index in range(first, last + 1):
            # ``max(start, index x width)`` and ``min(end, (index + 1) x width)`` written as
            # comparisons with the same results (a flow can span many bins).
            lo = index * width
            if not lo > start:
                lo = start
            hi = (index + 1) * width
            if not hi < end:
                hi = end
            if hi > lo:
                self.bins[index] = self.bins.get(index, 0.0) + nbytes * ((hi - lo) / span)

    def gbps_series(self) -> list[tuple[float, float]]:
        """(bin start s, mean Gbps in the bin) for every bin from 0 to the last used."""
        if not self.bins:
            return []
        last = max(self.bins)
        rate = self.spec.bandwidth_gbps
        return [
            (i * self.bin_s, min(rate, self.bins.get(i, 0.0) * 8 / self.bin_s / 1e9))
            for i in range(last + 1)
        ]
