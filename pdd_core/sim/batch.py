"""The running batch of a simulated instance: admission order, paged KV, token times.

Bookkeeping is per change, not per sequence and step: every sequence of a batch advances by
the same steps, so the instance counts its steps (``_clock``) and a sequence's counters are
brought up to date from that count only when it leaves the batch or is asked about (a probe);
the batch's total context, the tokens it still owes and the step at which each sequence ends
(a heap) are kept as aggregates. Token times work the same way: a sequence that stays in the
batch has the same gap at every segment (the segment's first token minus the previous one's
last), so the instance keeps those gaps once (a stack of suffix maxima) and a sequence takes
the largest since it joined when it leaves. Only the sequences that joined since the last
segment, finish, or are probed are touched one by one, in batch order, so the results are
those of updating every sequence at every segment.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.estimates import occupancy
from pdd_core.predict import DecodeState
from pdd_core.sim.steps import PrefillMemo, StepModel
from pdd_core.sim.work import Host, Seq, StepClock
from pdd_core.specs import ChipSpec, ModelSpec, Role
from pdd_core.tuples import new_tuple


class RunningBatch(StepModel):
    """The decoding half of ``instance.Instance``: its running batch, waiting queue and KV
    pool, and the settling of each decode segment (see the module docstring)."""

    def __init__(
        self,
        host: Host,
        model: ModelSpec,
        chip: ChipSpec,
        tp: perf.ShapeLike,
        memo: PrefillMemo | None,
        *,
        kv_tokens: int,
        max_batch: int,
    ) -> None:
        super().__init__(model, chip, tp, memo)
        self.host = host
        self._schedule = host.schedule  # read once: every iteration schedules its end
        self.kv_tokens = kv_tokens
        self.max_batch = max_batch
        self.batch: dict[int, Seq] = {}  # by ticket: insertion (admission) order
        self.waiting: deque[Seq] = deque()
        self.kv_used = 0  # own pages of the batch, plus the pinned prefix pages of ``pool_cache``
        # A prefix cache whose pages share this KV pool (a colocated instance's): a running
        # sequence pins its shared prefix there, counted once however many sequences share it.
        self.pool_cache: RadixCache | None = None
        self.last_step_s = 0.0
        self.preemptions = 0
        self._remaining = 0  # tokens still to emit, summed over the running batch
        self._clock = StepClock()  # decode steps settled on this instance
        self._tickets = 0  # the next sequence's place in the batch order
        self._context = 0  # context tokens, summed over the running batch
        self._ends: list[tuple[int, int, Seq]] = []  # (step it ends at, ticket, seq); lazy
        self._fresh: list[tuple[int, Seq]] = []  # joined since the last segment
        self._probed: dict[int, Seq] = {}  # sequences of the batch with a probe pending
        self._last = math.nan  # the last token time of the latest segment
        self._segments = 0  # segments settled (the index of the next one)
        # Suffix maxima of the segments' gaps: indices increasing, gaps decreasing.
        self._gap_at: list[int] = []
        self._gap_max: list[float] = []
        # While a segment settles: the sequences still to visit, and the ticket visited.
        self._todo: list[int] | None = None
        self._cursor = -1

    # ---- load, as the router sees it ------------------------------------------------------

    @property
    def load(self) -> float:
        """Occupancy in [0, 1] as the router sees it (``estimates.decode_load``)."""
        return occupancy(
            len(self.batch),
            len(self.waiting),
            self.max_batch,
            self.kv_tokens - self.kv_used,
            self.kv_tokens,
        )

    def decode_state(self, hit_tokens: int = 0) -> DecodeState:
        """What ``pdd_core.predict`` needs of this instance as a decoder (see its docstring)."""
        active = len(self.batch)
        remaining = self._remaining / active if active else 0.0
        # The fields in order (active, max_batch, free_kv_tokens, waiting, step_s,
        # mean_remaining_tokens, hit_tokens, kv_capacity_tokens; ``tuples.new_tuple``): every
        # arrival builds one state per decoder.
        return new_tuple(
            DecodeState,
            (
                active,
                self.max_batch,
                self.kv_tokens - self.kv_used,
                len(self.waiting),
                self.last_step_s,
                remaining,
                hit_tokens,
                self.kv_tokens,
            ),
        )

    # ---- settling a segment ----------------------------------------------------------------

    def _settle_decode(self, now: float, first: float, k: int, last_step: float) -> None:
        """Settle a decode segment of ``k`` steps (or a mixed iteration's one) that emitted its
        first token at ``first`` and its last at ``now``, ``last_step`` seconds the last step."""
        # The segment's tokens: the first at ``first``, the last at ``now``, and the longest
        # gap inside it the last step (``Flight.token_at`` inlined, and ``max`` written as
        # comparisons with the same result: this loop is the hot path).
        last = now if k > 1 else first
        inner_gap = last_step if k > 1 else 0.0
        size = len(self.batch)
        main = Role.MAIN_DECODE
        fresh, self._fresh = self._fresh, []
        joined = 0
        after = self._segments + 1
        for ticket, seq in fresh:  # first segment here: the gap from the token before
            if seq.ticket != ticket:
                continue
            joined += 1
            flight = seq.flight
            if seq._done == 0 and seq.role is main:
                flight.md_first_s = first
            if flight.first_token_s != flight.first_token_s:  # NaN: no token yet
                flight.first_token_s = first
                gap = inner_gap
            else:
                gap = first - flight.last_token_s
                if inner_gap > gap:  # noqa: PLR1730 - max() is a call per sequence
                    gap = inner_gap
            if gap > flight.max_gap_s:  # noqa: PLR1730 - as above
                flight.max_gap_s = gap
            flight.last_token_s = last
            seq.gap_from = after
        if size > joined:  # the others' last token was the previous segment's last
            gap = first - self._last
            if inner_gap > gap:  # noqa: PLR1730 - as above
                gap = inner_gap
            gap_max = self._gap_max
            while gap_max and gap_max[-1] <= gap:
                gap_max.pop()
                self._gap_at.pop()
            gap_max.append(gap)
            self._gap_at.append(self._segments)
        self._segments = after
        self._last = last
        clock = self._clock.steps + k
        self._clock.steps = clock
        self._context += k * size
        # Tokens left over the batch: every sequence emitted ``k``; those leaving the batch
        # take what they still had with them (a finished one's overshoot comes back).
        remaining = self._remaining - k * size
        ends = self._ends
        if self._probed or (ends and ends[0][0] <= clock):  # some leave or are asked
            remaining = self._settle_leavers(now, clock, remaining)
        self.kv_used += k * size
        self._remaining = remaining

    def _settle_leavers(self, now: float, clock: int, remaining: int) -> int:
        """Visit, in batch order, the sequences that end by step ``clock`` or have a probe
        pending (the callbacks may probe sequences further on): the finished leave the batch,
        and a probed one leaves when its host takes it. Returns ``remaining`` less what the
        leavers still had to emit."""
        batch = self.batch
        ends = self._ends
        todo = list(self._probed)  # tickets (a sequence may be in twice)
        while ends and ends[0][0] <= clock:
            _, ticket, seq = heapq.heappop(ends)
            if seq.ticket == ticket:
                todo.append(ticket)
        heapq.heapify(todo)
        self._todo = todo
        gone: list[int] = []
        host = self.host
        while todo:
            ticket = heapq.heappop(todo)
            seq = batch[ticket]
            if ticket == self._cursor or seq.ticket != ticket:
                continue
            self._cursor = ticket
            self._sync(seq)
            if seq._remaining <= 0:
                remaining -= seq._remaining
                self._leave(seq)
                gone.append(ticket)
                self._release(seq)
                host.on_seq_finished(seq, now)
            elif seq.probe:
                seq.probe = False
                del self._probed[ticket]
                if host.on_probe(seq, now):
                    remaining -= seq._remaining
                    self._leave(seq)
                    gone.append(ticket)
                    self._release(seq)
        self._todo = None
        self._cursor = -1
        for ticket in gone:
            del batch[ticket]
        if not batch:
            self._gap_at.clear()
            self._gap_max.clear()
        return remaining

    def _join(self, seq: Seq) -> None:
        """Put an admitted (or rebuilt) sequence at the end of the running batch."""
        ticket = self._tickets
        self._tickets = ticket + 1
        seq.ticket = ticket
        seq.clock = self._clock
        seq.mark = self._clock.steps
        seq.gap_from = -1
        self.batch[ticket] = seq
        self._remaining += seq._remaining
        self._context += seq._context
        heapq.heappush(self._ends, (seq.mark + seq._remaining, ticket, seq))
        self._fresh.append((ticket, seq))
        if seq.probe:
            self._probed[ticket] = seq

    def _sync(self, seq: Seq) -> None:
        """Bring a running sequence's counters and its flight's token times up to date."""
        clock = self._clock.steps
        steps = clock - seq.mark
        if steps:
            seq.mark = clock
            seq._done += steps
            seq._context += steps
            seq._allocated += steps
            seq._remaining -= steps
        if seq.gap_from >= 0:  # it has run here: the gaps of its later segments, if any
            flight = seq.flight
            at = bisect_left(self._gap_at, seq.gap_from)
            if at < len(self._gap_at) and self._gap_max[at] > flight.max_gap_s:
                flight.max_gap_s = self._gap_max[at]
            flight.last_token_s = self._last
            seq.gap_from = self._segments

    def _leave(self, seq: Seq) -> None:
        """Take a synced sequence out of the batch's aggregates (the caller drops it)."""
        self._context -= seq._context
        self._probed.pop(seq.ticket, None)
        seq.ticket = -1
        seq.clock = None

    def _release(self, seq: Seq) -> None:
        self.kv_used -= seq._allocated
        seq._allocated = 0
        seq.in_batch = False
        if seq.pinned:
            self._unpin(seq)

    def _unpin(self, seq: Seq) -> None:
        """Release ``seq``'s pins; the prefix pages no other sequence pins leave the pool's
        count (they stay cached, evictable: free pages to a KV allocator)."""
        cache = self.pool_cache
        assert cache is not None
        before = cache.pinned_blocks()
        cache.unpin(seq.pinned)
        seq.pinned = ()
        self.kv_used -= (before - cache.pinned_blocks()) * cache.block_size
