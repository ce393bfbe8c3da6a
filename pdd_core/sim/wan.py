"""A WAN line inside the event loop: ``transfer.FairShareLink`` plus completion callbacks.

The flow model (processor sharing with per-transfer jitter) is the physics module's; this
adapter only turns its ``next_completion`` into a scheduled event, calls back the owner of each
finished flow, and bins the bytes over time for utilisation (each flow's bytes are spread evenly
over its lifetime, which is exact for a lone flow and an average under sharing, so a bin is
clipped to the line rate: spreading cannot create bandwidth the line does not have).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from pdd_core.sim.instance import Host
from pdd_core.specs import LinkSpec
from pdd_core.transfer import FairShareLink, Rng, transfer_time


class WanLine:
    """One WAN link of the simulated topology."""

    def __init__(self, host: Host, spec: LinkSpec, rng: Rng, bin_s: float) -> None:
        self.host = host
        self.spec = spec
        self.link = FairShareLink(spec, rng)
        self.bin_s = bin_s
        self.bins: dict[int, float] = {}
        self.total_bytes = 0.0
        self._callbacks: dict[int, Callable[[float], None]] = {}
        self._ids = itertools.count()
        self._version = 0

    def predicted_s(self, nbytes: float) -> float:
        """Jitter-free time of a new transfer at the current fair share (for routing)."""
        return transfer_time(self.spec, nbytes, None, flows=self.link.active_flows + 1)

    def start(self, nbytes: float, now: float, on_done: Callable[[float], None]) -> None:
        flow = next(self._ids)
        self.link.start(flow, nbytes, now)
        self._callbacks[flow] = on_done
        self._reschedule(now)

    def _reschedule(self, now: float) -> None:
        self._version += 1
        nxt = self.link.next_completion()
        if nxt is None:
            return
        version = self._version
        # Never schedule into the past: float rounding can put a drain a hair before ``now``.
        self.host.schedule(max(nxt[1], now), lambda: self._fire(version, max(nxt[1], now)))

    def _fire(self, version: int, t: float) -> None:
        if version != self._version:
            return
        done = self.link.advance(t)
        if not done:
            # The drain time rounded below its computed value: nudge and try again.
            self._version += 1
            nudged = self._version
            self.host.schedule(t + 1e-9, lambda: self._fire(nudged, t + 1e-9))
            return
        for completion in done:
            self._account(completion.nbytes, completion.started_s, completion.finished_s)
            self._callbacks.pop(int(completion.flow_id))(completion.finished_s)  # type: ignore[call-overload]
        self._reschedule(t)

    def _account(self, nbytes: float, start: float, end: float) -> None:
        self.total_bytes += nbytes
        if nbytes <= 0:
            return
        width = self.bin_s
        span = max(end - start, 1e-12)
        first, last = int(start // width), int(end // width)
        for index in range(first, last + 1):
            lo = max(start, index * width)
            hi = min(end, (index + 1) * width)
            if hi > lo or first == last:
                share = (hi - lo) / span if first != last else 1.0
                self.bins[index] = self.bins.get(index, 0.0) + nbytes * share

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
