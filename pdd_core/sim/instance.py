"""One serving instance in the simulator: prefill passes, decode segments, continuous batching.

The same class plays every role: a prefill instance (P) only runs prefill passes; a decode
instance (D, RLD, MD) runs decode segments plus, at MD, the extend passes of token-ID handoffs;
a colocated instance interleaves both (chunked prefill). Work is done in *passes*:

- a prefill pass takes queued chunks up to the token budget (``chunk_tokens``) and lasts
  ``perf.prefill_time`` of that batch (the chunks' mean new tokens over their token-weighted
  mean cached context, ``batch`` sequences: exact for one chunk, and the roofline's weight read
  is shared by the batch as on a real engine);
- a decode *segment* is ``k`` steps of an unchanged batch, where ``k`` is the number of steps
  until the first sequence finishes. Its duration is ``k x (s_0 + s_k) / 2`` with ``s_0`` and
  ``s_k`` from ``perf.decode_step_time`` at the first and last step's contexts (both terms of
  the roofline are linear in the total context, so the trapezoid is exact while one term
  binds). A change of composition (a join, a handoff probe) cuts the segment at the end of the
  step in flight. So the cost is per change of batch composition, never per token.

Admission reserves a sequence's whole final context (input + output) against the KV pool, so
no preemption is needed; a sequence that does not fit waits in FIFO order (DOMAIN.md section 5:
capacity bounds the batch).
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable
from typing import Protocol

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.sim.records import Flight
from pdd_core.specs import ChipSpec, ModelSpec, Role


@functools.lru_cache(maxsize=1 << 16)
def prefill_s(
    model: ModelSpec, chip: ChipSpec, new: int, cached: int, tp: perf.ShapeLike, *, batch: int = 1
) -> float:
    """``perf.prefill_time(...).seconds``, memoised: passes and routing estimates repeat the
    same sizes on identical instances, and the specs are frozen and hashable, so it is exact."""
    return perf.prefill_time(model, chip, new, cached, tp, batch=batch).seconds


# Context per sequence of the second point used to fit the decode-step lines (any large value).
_LINE_PROBE_TOKENS = 1 << 20


class Host(Protocol):
    """What an instance needs from the simulator: a clock and callbacks."""

    def schedule(self, t: float, fn: Callable[[], None]) -> None: ...

    def on_seq_finished(self, seq: Seq, now: float) -> None: ...

    def on_probe(self, seq: Seq, now: float) -> bool: ...


class Job:
    """Prefill (or extend) work of one request: ``remaining`` new tokens over ``cached``."""

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
    """A decoding sequence: ``context`` tokens of KV, ``remaining`` tokens still to emit."""

    __slots__ = ("context", "done", "flight", "in_batch", "probe", "remaining", "reserved", "role")

    def __init__(self, flight: Flight, context: int, tokens: int, role: Role) -> None:
        self.flight = flight
        self.context = context
        self.remaining = tokens
        self.done = 0
        self.reserved = context + tokens
        self.role = role
        self.probe = False
        self.in_batch = False


class Instance:
    """A simulated instance; see the module docstring for the pass model."""

    def __init__(
        self,
        host: Host,
        *,
        name: str,
        role: Role | None,
        model: ModelSpec,
        chip: ChipSpec,
        tp: perf.ShapeLike,
        kv_tokens: int,
        max_batch: int,
        chunk_tokens: int,
        cache: RadixCache | None = None,
    ) -> None:
        self.host = host
        self.name = name
        self.role = role
        self.model = model
        self.chip = chip
        self.tp = tp
        self.kv_tokens = kv_tokens
        self.max_batch = max_batch
        self.chunk_tokens = chunk_tokens
        self.cache = cache
        self.jobs: deque[Job] = deque()
        self.batch: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self.kv_used = 0
        self.backlog_s = 0.0
        self.busy_s = 0.0
        self.last_step_s = 0.0
        self._version = 0
        self._kind = ""  # "", "prefill" or "decode": the pass in flight
        self._start = 0.0
        self._end = 0.0
        self._steps = 0
        self._s0 = 0.0
        self._s1 = 0.0
        self._chunks: list[tuple[Job, int]] = []
        self._step_lines: dict[int, tuple[float, float, float, float, float]] = {}
        self._kind_last = ""  # the kind of the previous pass, to interleave prefill and decode

    # ---- load, as the router sees it ------------------------------------------------------

    @property
    def load(self) -> float:
        """Occupancy in [0, 1]: the higher of batch slots and KV pool in use."""
        slots = (len(self.batch) + len(self.waiting)) / self.max_batch
        return min(1.0, max(slots, self.kv_used / self.kv_tokens if self.kv_tokens else 1.0))

    def predicted_wait_s(self, reserve: int) -> float:
        """Predicted wait before a sequence reserving ``reserve`` tokens can join the batch.

        Zero when it fits now; otherwise the queue ahead times the time the current batch needs
        to free one sequence's room on average (mean remaining tokens x the last step time over
        the batch size). A heuristic for routing only; the simulation itself never uses it.
        """
        if not self.waiting and self._fits(reserve):
            return 0.0
        if not self.batch:
            return 0.0
        remaining = sum(s.remaining for s in self.batch) / len(self.batch)
        return (len(self.waiting) + 1) * remaining * self.last_step_s / len(self.batch)

    def step_time(self, batch: int, total_context: int) -> float:
        """``perf.decode_step_time`` of ``batch`` sequences holding ``total_context`` tokens.

        For a fixed batch, the roofline's compute and memory terms are both affine in the total
        context (FLOPs add ``4 layers d_attn`` per context token, bytes add ``KV(1)``), and comm
        and overhead do not depend on it. So two ``perf`` evaluations per batch size give both
        lines, and every later step is ``max`` of two lines plus a constant: the same numbers
        as calling ``perf`` (to float rounding), at a fraction of the cost.
        """
        lines = self._step_lines.get(batch)
        if lines is None:
            at_zero = perf.decode_step_time(self.model, self.chip, [0] * batch, self.tp)
            far = _LINE_PROBE_TOKENS
            at_far = perf.decode_step_time(self.model, self.chip, [far] * batch, self.tp)
            span = far * batch
            lines = (
                at_zero.compute_s,
                (at_far.compute_s - at_zero.compute_s) / span,
                at_zero.memory_s,
                (at_far.memory_s - at_zero.memory_s) / span,
                at_zero.comm_s + at_zero.overhead_s,
            )
            self._step_lines[batch] = lines
        c0, c_slope, m0, m_slope, fixed = lines
        return max(c0 + c_slope * total_context, m0 + m_slope * total_context) + fixed

    # ---- work arriving ----------------------------------------------------------------------

    def add_job(self, job: Job, now: float) -> None:
        self.jobs.append(job)
        self.backlog_s += job.estimate_s
        self._wake(now)

    def add_seq(self, seq: Seq, now: float) -> None:
        self.waiting.append(seq)
        self._wake(now)

    def probe(self, seq: Seq, now: float) -> None:
        """Ask for ``host.on_probe(seq)`` at the end of the step in flight (a handoff point)."""
        seq.probe = True
        self._wake(now)

    def withdraw(self, seq: Seq) -> bool:
        """Remove a sequence still waiting for admission; False if it already runs."""
        try:
            self.waiting.remove(seq)
        except ValueError:
            return False
        return True

    def _wake(self, now: float) -> None:
        if not self._kind:
            self._start_next(now)
            return
        if self._kind != "decode" or self._steps <= 1:
            return
        # Cut the segment at the end of the step in flight; the change applies from there.
        mean_step = (self._end - self._start) / self._steps
        in_flight = min(self._steps, int((now - self._start) / mean_step) + 1)
        if in_flight >= self._steps:
            return
        self._s1 = self._s0 + (self._s1 - self._s0) * (in_flight - 1) / (self._steps - 1)
        self._steps = in_flight
        self._end = self._start + in_flight * mean_step
        self._version += 1
        version = self._version
        self.host.schedule(self._end, lambda: self._boundary(version))

    # ---- passes -----------------------------------------------------------------------------

    def _boundary(self, version: int) -> None:
        if version != self._version:
            return
        now = self._end
        self.busy_s += now - self._start
        if self._kind == "prefill":
            self._settle_prefill(now)
        else:
            self._settle_decode(now)
        self._kind = ""
        self._start_next(now)

    def _settle_prefill(self, now: float) -> None:
        for job, chunk in self._chunks:
            job.remaining -= chunk
            job.cached += chunk
            if job.remaining == 0:
                self.jobs.remove(job)
                self.backlog_s = max(0.0, self.backlog_s - job.estimate_s)
                job.on_done(now)
        self._chunks = []

    def _settle_decode(self, now: float) -> None:
        k = self._steps
        first = self._start + self._s0
        keep: list[Seq] = []
        for seq in self.batch:
            flight = seq.flight
            if seq.done == 0 and seq.role is Role.MAIN_DECODE:
                flight.md_first_s = first
            flight.token_at(first)
            if k > 1:
                flight.max_gap_s = max(flight.max_gap_s, self._s1)
                flight.last_token_s = now
            seq.done += k
            seq.context += k
            seq.remaining -= k
            if seq.remaining <= 0:
                self._release(seq)
                self.host.on_seq_finished(seq, now)
            elif seq.probe:
                seq.probe = False
                if self.host.on_probe(seq, now):
                    self._release(seq)
                else:
                    keep.append(seq)
            else:
                keep.append(seq)
        self.batch = keep

    def _release(self, seq: Seq) -> None:
        self.kv_used -= seq.reserved
        seq.in_batch = False

    def _fits(self, reserve: int) -> bool:
        return len(self.batch) < self.max_batch and self.kv_used + reserve <= self.kv_tokens

    def _admit(self) -> None:
        while self.waiting:
            seq = self.waiting[0]
            # A sequence larger than the whole pool runs alone rather than blocking forever.
            if not self._fits(seq.reserved) and self.batch:
                break
            self.waiting.popleft()
            self.kv_used += seq.reserved
            seq.in_batch = True
            self.batch.append(seq)

    def _start_next(self, now: float) -> None:
        self._admit()
        if self.jobs and (not self.batch or self._kind_last != "prefill"):
            self._start_prefill(now)
        elif self.batch:
            self._start_decode(now)
        else:
            self._kind_last = ""
            return
        self._version += 1
        version = self._version
        self.host.schedule(self._end, lambda: self._boundary(version))

    def _start_prefill(self, now: float) -> None:
        budget = self.chunk_tokens
        chunks: list[tuple[Job, int]] = []
        for job in self.jobs:
            if budget <= 0:
                break
            chunk = min(job.remaining, budget)
            chunks.append((job, chunk))
            budget -= chunk
        total = sum(c for _, c in chunks)
        cached = sum(job.cached * c for job, c in chunks) / total
        seconds = prefill_s(
            self.model,
            self.chip,
            math.ceil(total / len(chunks)),
            round(cached),
            self.tp,
            batch=len(chunks),
        )
        for job, _ in chunks:
            if math.isnan(job.flight.prefill_start_s) and self.role is not Role.MAIN_DECODE:
                job.flight.prefill_start_s = now
        self._chunks = chunks
        self._kind = self._kind_last = "prefill"
        self._start, self._end = now, now + seconds

    def _start_decode(self, now: float) -> None:
        batch = self.batch
        b = len(batch)
        k = min(s.remaining for s in batch)
        # Pending prefill work or a probe interleaves after one step (chunked prefill).
        if self.jobs or any(s.probe for s in batch):
            k = 1
        total = sum(s.context for s in batch)
        s0 = self.step_time(b, total)
        s1 = self.step_time(b, total + (k - 1) * b) if k > 1 else s0
        self.last_step_s = s1
        self._s0, self._s1, self._steps = s0, s1, k
        self._kind = self._kind_last = "decode"
        self._start, self._end = now, now + k * (s0 + s1) / 2
