"""One serving instance in the simulator, batching as vLLM and SGLang do.

The same class plays every role: a prefill instance (P) only runs prefill passes; a decode
instance (D, RLD, MD) runs decode steps plus, at MD, the extend passes of token-ID handoffs;
a colocated instance serves both. Work is done in *iterations*, as in those engines:

- with both prefill work (queued chunks) and running sequences, one *mixed* iteration runs a
  decode step of the whole batch plus prefill chunks filling the rest of the token budget
  (``chunk_tokens`` minus the batch: chunked prefill with decode priority). Its time is the
  roofline of one forward over all those tokens: compute adds up (the prefill's and the step's
  FLOPs), the weights are read once (the prefill's weight read, which touches at least the
  experts the step does) plus the step's KV reads, and one launch overhead;
- with prefill work only, a prefill pass takes queued chunks up to the budget and lasts
  ``perf.prefill_time`` of that batch;
- with running sequences only, a decode *segment* is ``k`` steps of an unchanged batch, where
  ``k`` is the number of steps until the first sequence finishes or the KV pool fills. Its
  duration is ``k x (s_0 + s_k) / 2`` with ``s_0`` and ``s_k`` from ``perf.decode_step_time``
  at the first and last step's contexts (both roofline terms are affine in the total context,
  so the trapezoid is exact while one term binds). A change of composition (a join, a handoff
  probe) cuts the segment at the end of the step in flight, so the cost is per change of
  batch composition, never per token.

KV memory is paged: a sequence is admitted (FIFO) when a batch slot is free and the pool holds
its current context, and its pages grow by one token per step. A decoding sequence attends to
its whole context, so all of it occupies HBM: on a colocated instance the prefix it shares with
the instance's prefix cache is in the same pool, pinned there while it runs and counted once
however many running sequences share it (vLLM's and SGLang's prefix pages are referenced, not
copied, and a referenced page cannot be evicted); cached pages no running sequence references
are evictable, free pages to the allocator. When the pool cannot hold the
next step, the most recently admitted sequences are preempted (vLLM's recompute policy): their
pages are freed, they go back to the head of the queue, and on readmission their context is
recomputed by a prefill pass before they decode again. The first token of a request is the one
sampled at the end of its prefill: the decoding instance emits it when it admits the sequence.

With pipeline parallelism (``pp > 1``) an iteration's pass ends ``fill_s`` after its first stage
frees (``pdd_core.pipeline``): the instance starts its next iteration when the first stage is
free, so up to ``pp`` iterations are in flight as in vLLM's virtual engines and SGLang's chunked
pipeline, and a prefill job whose last chunk ran is done ``fill_s`` later (one request's latency).
Decode steps wait for their previous tokens, so they are never overlapped.

The running batch's bookkeeping (per change, not per sequence and step) is ``batch.py``'s.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.sim.batch import RunningBatch
from pdd_core.sim.steps import PrefillMemo, prefill_s, prefill_timing
from pdd_core.sim.work import Host, Job, Seq
from pdd_core.specs import ChipSpec, ModelSpec, Role

__all__ = ["Host", "Instance", "Job", "Seq", "prefill_s", "prefill_timing"]


class Instance(RunningBatch):
    """A simulated instance; see the module docstring for the iteration model
    (``batch.RunningBatch`` for the running batch, ``steps.StepModel`` for the duration of
    each iteration)."""

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
        memo: PrefillMemo | None = None,
        shares_pool: bool = False,
    ) -> None:
        super().__init__(host, model, chip, tp, memo, kv_tokens=kv_tokens, max_batch=max_batch)
        if shares_pool:
            self.pool_cache = cache
        self.name = name
        self.role = role
        self.chunk_tokens = chunk_tokens
        self.cache = cache
        self.jobs: deque[Job] = deque()
        self.backlog_s = 0.0
        self.busy_s = 0.0
        self._version = 0
        self._kind = ""  # "", "prefill", "mixed" or "decode": the iteration in flight
        self._start = 0.0
        self._end = 0.0
        self._steps = 0
        self._s0 = 0.0
        self._s1 = 0.0
        self._chunks: list[tuple[Job, int]] = []
        self._fill = 0.0  # of the iteration in flight: its pass's latency after the first stage

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
        ticket = seq.ticket
        if ticket >= 0 and self.batch.get(ticket) is seq:
            self._probed[ticket] = seq
            if self._todo is not None and ticket > self._cursor:
                heapq.heappush(self._todo, ticket)  # later in this segment's order
        self._wake(now)

    def withdraw(self, seq: Seq) -> bool:
        """Remove a sequence that has not run yet from the queue; False if it runs or has run
        (a preempted one holds tokens that must be handed over, not dropped)."""
        if seq.done:
            return False
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
        in_flight = int((now - self._start) / mean_step) + 1  # 1-based; the last: no cut
        if in_flight >= self._steps:
            return
        self._s1 = self._s0 + (self._s1 - self._s0) * (in_flight - 1) / (self._steps - 1)
        self._steps = in_flight
        self._end = self._start + in_flight * mean_step
        self._version += 1
        version = self._version
        self._schedule(self._end, lambda: self._boundary(version))

    # ---- iterations -------------------------------------------------------------------------

    def _boundary(self, version: int) -> None:
        if version != self._version:
            return
        now = self._end
        self.busy_s += now - self._start
        kind = self._kind
        # ``_kind`` stays set while settling, so work the callbacks add waits for the next
        # iteration instead of starting one inside this one.
        if kind != "prefill":
            self._settle_decode(now, self._start + self._s0, self._steps, self._s1)
        if kind != "decode":
            self._settle_prefill(now)
        self._start_next(now)

    def _settle_prefill(self, now: float) -> None:
        chunks, self._chunks = self._chunks, []
        fill = self._fill
        for job, chunk in chunks:
            job.remaining -= chunk
            job.cached += chunk
            if job.remaining == 0:
                self.jobs.remove(job)
                left = self.backlog_s - job.estimate_s  # ``max(0.0, left)`` written out
                self.backlog_s = left if left > 0.0 else 0.0
                if fill:  # its last micro-batch still drains through the later stages
                    self._done_later(job, now + fill)
                else:
                    job.on_done(now)

    def _done_later(self, job: Job, done: float) -> None:
        self._schedule(done, lambda: job.on_done(done))

    def _admit(self, now: float) -> None:
        waiting = self.waiting
        while waiting and len(self.batch) < self.max_batch:
            seq = waiting[0]
            own = seq.context - seq.shared + 1
            need = own
            if seq.shared and self.pool_cache is not None:
                pinned, missing = self._pin(seq)
                own += missing
                need = own + pinned
            # A sequence larger than the whole pool runs alone rather than blocking forever.
            if self.kv_used + need > self.kv_tokens and self.batch:
                if seq.pinned:
                    self._unpin_unadmitted(seq)
                break
            waiting.popleft()
            self.kv_used += need
            seq._allocated = own
            seq.in_batch = True
            if seq.preempted:
                seq.preempted = False
                self._recompute(seq, now)
                continue
            flight = seq.flight
            if math.isnan(flight.first_token_s):
                # The token sampled at the end of prefill, emitted on admission.
                flight.token_at(now)
                if seq.role is Role.MAIN_DECODE:
                    flight.md_first_s = now
                seq._done = 1
                seq._remaining -= 1
                if seq._remaining <= 0:
                    self._release(seq)
                    self.host.on_seq_finished(seq, now)
                    continue
            self._join(seq)

    def _pin(self, seq: Seq) -> tuple[int, int]:
        """Pin ``seq``'s shared prefix in the pool's prefix cache. Returns the tokens of the
        pages no running sequence pinned yet (they now count in the pool), and the tokens of
        the prefix evicted since its prefill (the sequence then holds them as its own)."""
        cache = self.pool_cache
        assert cache is not None
        size = cache.block_size
        hashes = seq.flight.request.block_hashes[: math.ceil(seq.shared / size)]
        before = cache.pinned_blocks()
        held = cache.pin(hashes)
        seq.pinned = hashes[:held]
        return (cache.pinned_blocks() - before) * size, max(0, seq.shared - held * size)

    def _unpin_unadmitted(self, seq: Seq) -> None:
        """Undo ``_pin`` for a sequence that did not fit (nothing was added to ``kv_used``)."""
        cache = self.pool_cache
        assert cache is not None
        cache.unpin(seq.pinned)
        seq.pinned = ()

    def _recompute(self, seq: Seq, now: float) -> None:
        """Rebuild a preempted sequence's KV (a prefill of its context), then let it decode."""

        def rebuilt(t: float) -> None:
            if seq.in_batch:
                self._join(seq)

        new = seq.context - seq.shared
        est = self.prefill_s(new, seq.shared)
        self.jobs.append(Job(seq.flight, new, seq.shared, est, rebuilt))
        self.backlog_s += est

    def _make_room(self) -> None:
        """Preempt the newest sequences until the pool holds one more token per sequence."""
        batch = self.batch
        while len(batch) > 1 and self.kv_used + len(batch) > self.kv_tokens:
            _, seq = batch.popitem()
            self._sync(seq)
            self._remaining -= seq._remaining
            self._leave(seq)
            self.kv_used -= seq._allocated
            seq._allocated = 0
            seq.in_batch = False
            if seq.pinned:
                self._unpin(seq)
            seq.preempted = True
            self.preemptions += 1
            self.waiting.appendleft(seq)

    def _start_next(self, now: float) -> None:
        self._kind = "admit"  # callbacks of admission must not start an iteration
        if self.waiting:
            self._admit(now)
        batch = self.batch
        size = len(batch)
        if size > 1 and self.kv_used + size > self.kv_tokens:
            self._make_room()
        if self.jobs and batch:
            self._start_mixed(now)
        elif self.jobs:
            self._start_prefill(now)
        elif batch:
            self._start_decode(now)
        else:
            self._kind = ""
            return
        self._version += 1
        version = self._version
        self._schedule(self._end, lambda: self._boundary(version))

    def _take_chunks(self, budget: int, now: float) -> perf.Timing:
        chunks: list[tuple[Job, int]] = []
        total = weighted = 0  # chunk tokens, and their cached context (integers: exact)
        stamp = self.role is not Role.MAIN_DECODE
        for job in self.jobs:
            if budget <= 0:
                break
            if job.on_start is not None:
                start, job.on_start = job.on_start, None
                start(job)
            chunk = job.remaining
            if budget < chunk:  # noqa: PLR1730 - ``min`` written out, a call less per chunk
                chunk = budget
            chunks.append((job, chunk))
            budget -= chunk
            total += chunk
            weighted += job.cached * chunk
            if stamp and job.flight.prefill_start_s != job.flight.prefill_start_s:  # NaN
                job.flight.prefill_start_s = now
        self._chunks = chunks
        cached = weighted / total
        return self.prefill_timing(math.ceil(total / len(chunks)), round(cached), len(chunks))

    def _start_prefill(self, now: float) -> None:
        timing = self._take_chunks(self.chunk_tokens, now)
        fill = self._fill = timing.fill_s
        self._kind = "prefill"
        self._start, self._end = now, now + (timing.seconds - fill if fill else timing.seconds)

    def _start_mixed(self, now: float) -> None:
        batch = self.batch
        b = len(batch)
        timing = self._take_chunks(max(1, self.chunk_tokens - b), now)
        self._fill = timing.fill_s
        seconds = self.mixed_time(timing, b, self._context)
        self.last_step_s = seconds
        self._s0 = self._s1 = seconds
        self._steps = 1
        self._kind = "mixed"
        self._start, self._end = now, now + seconds

    def _start_decode(self, now: float) -> None:
        b = len(self.batch)
        ends = self._ends
        while ends[0][2].ticket != ends[0][1]:  # entries of sequences that left
            heapq.heappop(ends)
        k = ends[0][0] - self._clock.steps  # the fewest tokens left
        total = self._context
        # A probe is a handoff point after one step; the pool bounds the steps ahead.
        if self._probed:
            k = 1
        room = (self.kv_tokens - self.kv_used) // b  # ``max(1, min(k, room))`` written out
        if room < k:  # noqa: PLR1730 - a call less per segment
            k = room
        if k < 1:  # noqa: PLR1730 - as above
            k = 1
        s0, s1 = self.step_times(b, total, total + (k - 1) * b if k > 1 else total)
        self.last_step_s = s1
        self._s0, self._s1, self._steps = s0, s1, k
        self._kind = "decode"
        self._start, self._end = now, now + k * (s0 + s1) / 2
