"""The units of work an instance serves: prefill jobs and decoding sequences, and the host
protocol it calls back (split from ``instance.py``, which holds the batching model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pdd_core.sim.records import Flight
from pdd_core.specs import Role


class Host(Protocol):
    """What an instance needs from the simulator: a clock and callbacks."""

    def schedule(self, t: float, fn: Callable[[], None]) -> None: ...

    def on_seq_finished(self, seq: Seq, now: float) -> None: ...

    def on_probe(self, seq: Seq, now: float) -> bool: ...


class Job:
    """Prefill (or extend, or recompute) work of one request: ``remaining`` new tokens over
    ``cached``; ``on_done`` is called with the time its last chunk ends. ``on_start``, if
    given, is called once with the job just before its first chunk is cut (a prefill reads
    its instance's prefix cache then, as an engine's scheduler does)."""

    __slots__ = ("cached", "estimate_s", "flight", "on_done", "on_start", "remaining")

    def __init__(
        self,
        flight: Flight,
        new_tokens: int,
        cached: int,
        estimate_s: float,
        on_done: Callable[[float], None],
        *,
        on_start: Callable[[Job], None] | None = None,
    ) -> None:
        self.flight = flight
        self.remaining = new_tokens
        self.cached = cached
        self.estimate_s = estimate_s
        self.on_done = on_done
        self.on_start = on_start


class StepClock:
    """The decode steps an instance has settled: every sequence of its batch advances by each
    of them, so a running sequence's counters are its own plus the steps since its ``mark``."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps = 0


class Seq:
    """A decoding sequence: ``context`` tokens of KV, ``remaining`` tokens still to emit.

    ``shared`` is the prefix it references in the instance's radix cache (MD's DRC, a
    colocated instance's prefix cache) instead of holding a copy, as SGLang's radix pages are
    shared (on a colocated instance those pages are in the same KV pool: the sequence pins
    them, ``pinned``, and a page pinned by several sequences counts once); ``allocated`` is
    the KV (in tokens) its own pages hold; ``preempted`` marks a
    sequence whose pages were freed and whose context must be recomputed on readmission.

    While it is in a batch, the instance does not touch it at every step: ``done``,
    ``context``, ``allocated`` and ``remaining`` are the stored counters plus (minus, for
    ``remaining``) the steps its instance's ``clock`` has counted since ``mark``; the instance
    brings the stored ones up to date (``Instance._sync``) when the sequence leaves the batch
    or is probed.
    """

    __slots__ = (
        "_allocated",
        "_context",
        "_done",
        "_remaining",
        "clock",
        "flight",
        "gap_from",
        "in_batch",
        "mark",
        "pinned",
        "preempted",
        "probe",
        "role",
        "shared",
        "ticket",
    )

    def __init__(
        self, flight: Flight, context: int, tokens: int, role: Role, shared: int = 0
    ) -> None:
        self.flight = flight
        self._context = context
        self.shared = min(shared, context)
        self._remaining = tokens
        self._done = 0
        self._allocated = 0
        self.role = role
        self.probe = False
        self.in_batch = False
        self.preempted = False
        # The shared prefix's block hashes this sequence pins in its instance's prefix cache
        # while it holds pages there (``Instance._admit``).
        self.pinned: tuple[int, ...] = ()
        # Kept by the instance whose batch holds the sequence (``Instance._join``): its place
        # in the batch order, the instance's step clock and the clock's count when the stored
        # counters were last brought up to date, and the first of the instance's segments
        # whose token gap ``flight.max_gap_s`` does not yet include.
        self.ticket = -1
        self.clock: StepClock | None = None
        self.mark = 0
        self.gap_from = -1

    def _pending(self) -> int:
        clock = self.clock
        return 0 if clock is None else clock.steps - self.mark

    @property
    def done(self) -> int:
        """Tokens emitted by this sequence."""
        return self._done + self._pending()

    @property
    def context(self) -> int:
        """Tokens of KV it attends to."""
        return self._context + self._pending()

    @property
    def allocated(self) -> int:
        """KV tokens its own pages hold."""
        return self._allocated + self._pending()

    @property
    def remaining(self) -> int:
        """Tokens still to emit."""
        return self._remaining - self._pending()
