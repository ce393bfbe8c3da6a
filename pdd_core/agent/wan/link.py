"""One direction of an emulated WAN line: fair-share serialization, then propagation delay.

Split from ``wan`` so the shaping model (the part that must agree with the physics) reads on
its own. Capacity is shared by the connections with bytes to send exactly as
``pdd_core.fairshare.FairShareLink`` shares it, and every chunk then takes a one-way delay of
``RTT / 2`` plus seeded jitter. The link keeps its own timeline (``FairShareLink`` time): a
connection with bytes waiting starts its next chunk at the instant the previous one drained on
that timeline, not when the event loop got round to it, so timer slop delays delivery by a
fraction of a millisecond but never accumulates into lost bandwidth.

TCP slow start (``LineSettings.initial_window_bytes`` > 0) is charged as the simulator charges
it (``transfer.slow_start_extra_s``: latency that uses no bandwidth): a connection that starts
sending, or sends again after it has been idle longer than Linux's minimum retransmission
timeout (``transfer.TCP_RTO_MIN_S``; ``tcp_slow_start_after_idle = 1``), delivers the byte at
offset ``b`` of that burst ``slow_start_extra_s(b, line rate, RTT, window)`` later than a warm
connection would; once all it sent is delivered that delay is behind it. The simulator charges
every WAN transfer from the initial window; here a connection reused within 200 ms of its last
delivery keeps its window, as Linux does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, replace

from pdd_core.fairshare import FairShareLink, FlowCompletion
from pdd_core.specs import LinkKind, LinkSpec
from pdd_core.transfer import TCP_RTO_MIN_S, sample_jitter, slow_start_extra_s

# Unit of shaping: 256 KiB is 2 ms on a 1 Gbps line, fine-grained enough for fair sharing
# while keeping the proxy's per-chunk Python overhead well below the line rate it emulates.
CHUNK_BYTES = 256 * 1024
MIN_WINDOW_BYTES = 4 * 1024 * 1024  # bytes a direction may hold in flight, at least
NEAR_S = 2e-4  # drains closer than this are settled without sleeping (see ShapedLink._run)


@dataclass(frozen=True, slots=True)
class LineSettings:
    """What the emulated line is now: capacity per direction, round trip, one-way jitter, and
    the TCP initial window a connection starts (or restarts after idle) from; 0: always warm."""

    bandwidth_gbps: float
    rtt_ms: float
    jitter_ms: float = 0.0
    initial_window_bytes: float = 0.0

    def __post_init__(self) -> None:
        if not self.bandwidth_gbps > 0:
            raise ValueError(f"bandwidth_gbps: must be positive, got {self.bandwidth_gbps!r}")
        if self.rtt_ms < 0 or self.jitter_ms < 0 or self.initial_window_bytes < 0:
            raise ValueError("rtt_ms, jitter_ms, initial_window_bytes: must be non-negative")

    def link_spec(self) -> LinkSpec:
        """The physics' view of this line (what ``transfer.transfer_time`` takes)."""
        return LinkSpec(
            id="emulated",
            kind=LinkKind.WAN,
            source_site="a",
            target_site="b",
            bandwidth_gbps=self.bandwidth_gbps,
            rtt_ms=self.rtt_ms,
            jitter_ms=self.jitter_ms,
        )

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbps * 1e9 / 8


class Pipe:
    """One direction of one connection: bytes read, waiting for the line, and in delay."""

    def __init__(self, link: ShapedLink, writer: asyncio.StreamWriter) -> None:
        self.link = link
        self.writer = writer
        # Bytes read but not yet on the line, as the reads returned them: the proxy never
        # copies a payload in Python (at line rate, copies are what would cost the most).
        self.waiting: deque[memoryview] = deque()
        self.waiting_bytes = 0
        self.on_line = 0
        self.delayed: deque[tuple[float, list[memoryview]]] = deque()
        self.delayed_bytes = 0
        self.last_delivery = 0.0
        # Bytes this connection has sent since it (re)started from the initial window, and the
        # slow-start delay its earlier sends of that burst already paid (``ShapedLink._ramp``).
        self.burst_bytes = 0
        self.ramp_paid_s = 0.0
        self.eof = False
        self.changed = asyncio.Event()

    def held(self) -> int:
        return self.waiting_bytes + self.on_line + self.delayed_bytes

    def push(self, data: bytes) -> None:
        self.waiting.append(memoryview(data))
        self.waiting_bytes += len(data)

    def take(self, limit: int) -> list[memoryview]:
        """Up to ``limit`` waiting bytes, splitting a read without copying it."""
        taken: list[memoryview] = []
        size = 0
        while self.waiting and size < limit:
            view = self.waiting.popleft()
            if size + len(view) > limit:
                self.waiting.appendleft(view[limit - size :])
                view = view[: limit - size]
            taken.append(view)
            size += len(view)
        self.waiting_bytes -= size
        return taken


class ShapedLink:
    """One direction of the line: fair-share serialization, then propagation delay."""

    def __init__(self, settings: LineSettings, rng: random.Random) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._epoch = loop.time()
        self._rng = rng
        self.settings = settings
        self._jitter_spec = settings.link_spec()
        self._line = FairShareLink(replace(settings, rtt_ms=0.0).link_spec())
        self._chunks: dict[Hashable, tuple[Pipe, list[memoryview]]] = {}
        self._ids = itertools.count()
        self._wake = asyncio.Event()
        self._task = loop.create_task(self._run())

    def clock(self) -> float:
        """Seconds since this link was created: the time base of its ``FairShareLink``."""
        return self._loop.time() - self._epoch

    def window(self) -> int:
        """Bytes a direction may hold: twice the bandwidth-delay product, so TCP-like windowing
        never becomes the bottleneck the configured physics does not have; the delay counts
        slow start's longest ramp, which holds bytes but, as in the physics, uses no bandwidth."""
        s = self.settings
        delay = (s.rtt_ms + 4 * s.jitter_ms) / 1000.0 + 0.01 + self._longest_ramp_s()
        return max(MIN_WINDOW_BYTES, int(2 * s.bytes_per_s * delay))

    def offer(self, pipe: Pipe) -> None:
        """``pipe`` has new bytes: put its next chunk on the line if it has none there."""
        now = self.clock()
        self._settle(now)
        if not pipe.on_line and pipe.waiting:
            if not pipe.delayed:
                # Everything sent was delivered: idle past its retransmission timeout, the
                # connection starts from the initial window again; otherwise its window stays
                # where it got to and the delay its earlier sends paid is behind it.
                idle = max(TCP_RTO_MIN_S, self.settings.rtt_ms / 1000.0)
                if now - pipe.last_delivery > idle:
                    pipe.burst_bytes = 0
                pipe.ramp_paid_s = self._ramp(pipe.burst_bytes)
            self._start(pipe, now)
            self._wake.set()

    def set_settings(self, settings: LineSettings) -> None:
        """Change capacity, RTT or jitter from now on; bytes already sent keep their timing."""
        # The line's clock may run a hair ahead of the loop's (see _run), never behind.
        now = max(self.clock(), self._line.now)
        self._settle(now)
        self._finish(self._line.advance(now))
        # FairShareLink reads its LinkSpec at every step, and it has been brought to ``now``,
        # so swapping it changes every flow's share from this instant only.
        self._line.link = replace(settings, rtt_ms=0.0).link_spec()
        self.settings = settings
        self._jitter_spec = settings.link_spec()
        self._wake.set()

    def close(self) -> None:
        self._task.cancel()

    def drop(self, pipe: Pipe) -> int:
        """``pipe``'s sender reset its connection: a reset discards the sender's unsent bytes,
        so what this direction holds for it and has not delivered leaves the line now (its
        chunk in serialization stops where it is), as a cancelled flow leaves the simulator's
        ``FairShareLink``. Returns the bytes dropped."""
        now = max(self.clock(), self._line.now)
        self._settle(now)
        dropped = pipe.waiting_bytes + pipe.delayed_bytes
        for chunk in [c for c, (owner, _) in self._chunks.items() if owner is pipe]:
            del self._chunks[chunk]
            dropped += round(self._line.cancel(chunk, now))
        pipe.waiting.clear()
        pipe.delayed.clear()
        pipe.waiting_bytes = pipe.delayed_bytes = pipe.on_line = 0
        pipe.changed.set()
        self._wake.set()
        return dropped

    def _start(self, pipe: Pipe, at: float) -> None:
        data = pipe.take(CHUNK_BYTES)
        size = sum(len(view) for view in data)
        chunk = next(self._ids)
        self._chunks[chunk] = (pipe, data)
        pipe.on_line = size
        self._line.start(chunk, size, max(at, self._line.now))

    def _settle(self, now: float) -> None:
        """Process every chunk that drained by ``now``, at its exact drain time on the line."""
        while (upcoming := self._line.next_completion()) is not None:
            due = upcoming[1]
            if due > now:
                return
            done = self._line.advance(max(due, self._line.now))
            if not done:  # float rounding left the drain a hair later
                done = self._line.advance(max(due, self._line.now) + 1e-9)
                if not done:
                    return
            self._finish(done)

    def _finish(self, done: list[FlowCompletion]) -> None:
        for completion in done:
            finished = completion.finished_s
            pipe, data = self._chunks.pop(completion.flow_id)
            size, pipe.on_line = pipe.on_line, 0
            jitter = 0.0
            if self.settings.jitter_ms > 0:
                jitter = sample_jitter(self._jitter_spec, self._rng).delay_s
            pipe.burst_bytes += size
            ramp = self._ramp(pipe.burst_bytes) - pipe.ramp_paid_s
            arrive = finished + self.settings.rtt_ms / 2000.0 + jitter + ramp
            # TCP delivers in order: a chunk never overtakes the one before it.
            pipe.last_delivery = max(pipe.last_delivery, arrive)
            pipe.delayed.append((pipe.last_delivery, data))
            pipe.delayed_bytes += size
            pipe.changed.set()
            if pipe.waiting:
                self._start(pipe, finished)

    def _longest_ramp_s(self) -> float:
        """Slow start's delay of a burst too long for it to end before its window is full."""
        return self._ramp(math.inf)

    def _ramp(self, burst_bytes: float) -> float:
        """Seconds slow start delays the byte at offset ``burst_bytes`` of a burst started
        from the initial window (module docstring); 0 on a warm line."""
        s = self.settings
        if s.initial_window_bytes <= 0:
            return 0.0
        rtt_s = s.rtt_ms / 1000.0
        return slow_start_extra_s(burst_bytes, s.bytes_per_s, rtt_s, s.initial_window_bytes)

    async def _run(self) -> None:
        while True:
            now = self.clock()
            upcoming = self._line.next_completion()
            # A drain due within NEAR_S is settled now, on the line's own clock (it still lands
            # at its exact time there): sleeping for it would cost a whole timer tick (about
            # 1 ms), which a small control frame would pay on every hop.
            if upcoming is not None and upcoming[1] - now < NEAR_S:
                now = max(now, upcoming[1])
            self._settle(now)
            upcoming = self._line.next_completion()
            self._wake.clear()
            timeout = None if upcoming is None else max(NEAR_S, upcoming[1] - self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
