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
    ``cached``; ``on_done`` is called with the time its last chunk ends."""

    __slots__ = ("cached", "estimate_s", "flight", "on_done", "remaining")

    def __init__(
        self,
        flight: Flight,
        new_tokens: int,
        cached: int,
        estimate_s: float,
        on_done: Callable[[float], None],
    ) -> None:
        self.flight = flight
        self.remaining = new_tokens
        self.cached = cached
        self.estimate_s = estimate_s
        self.on_done = on_done


class Seq:
    """A decoding sequence: ``context`` tokens of KV, ``remaining`` tokens still to emit.

    ``shared`` is the prefix it references in the instance's radix cache (MD's DRC, a
    colocated instance's prefix cache) instead of holding a copy, as SGLang's radix pages are
    shared; ``allocated`` is the KV (in tokens) its own pages hold; ``preempted`` marks a
    sequence whose pages were freed and whose context must be recomputed on readmission.
    """

    __slots__ = (
        "allocated",
        "context",
        "done",
        "flight",
        "in_batch",
        "preempted",
        "probe",
        "remaining",
        "role",
        "shared",
    )

    def __init__(
        self, flight: Flight, context: int, tokens: int, role: Role, shared: int = 0
    ) -> None:
        self.flight = flight
        self.context = context
        self.shared = min(shared, context)
        self.remaining = tokens
        self.done = 0
        self.allocated = 0
        self.role = role
        self.probe = False
        self.in_batch = False
        self.preempted = False
