"""How long an instance's iterations take: ``pdd_core.perf`` evaluated and memoised per instance.

``StepModel`` is the timing half of ``Instance`` (``instance.py`` holds the batching): prefill
passes (``perf.prefill_time``), decode steps (``perf.decode_step_time``, through two lines fitted
exactly per batch size) and mixed iterations (one roofline over a step and prefill chunks).
Every memo here is exact: the same inputs give the same ``perf`` figure, only computed once.
"""

from __future__ import annotations

from pdd_core import perf, profile
from pdd_core.roofline import roofline
from pdd_core.specs import ChipSpec, ModelSpec
from pdd_core.specs.shape import as_shape


def prefill_timing(
    model: ModelSpec, chip: ChipSpec, new: int, cached: int, tp: perf.ShapeLike, *, batch: int = 1
) -> perf.Timing:
    """``perf.prefill_time(...)`` of one pass, for callers outside an instance (not memoised: a
    profile registered later must time the next call; instances use ``StepModel``'s memo)."""
    return perf.prefill_time(model, chip, new, cached, tp, batch=batch)


def prefill_s(
    model: ModelSpec, chip: ChipSpec, new: int, cached: int, tp: perf.ShapeLike, *, batch: int = 1
) -> float:
    """Seconds of ``prefill_timing``."""
    return prefill_timing(model, chip, new, cached, tp, batch=batch).seconds


# Entries of a prefill-time memo before it is cleared (bounds memory on long runs).
MEMO_LIMIT = 1 << 16

PrefillMemo = dict[tuple[int, int, int], perf.Timing]

# Roofline prefill times by (new, cached, batch), one memo per (model, chip, shape): every
# instance of that kind, in every run of this process, shares it, so the frozen specs are hashed
# once per instance instead of once per pass (the roofline is a pure function of its inputs).
_MEMOS: dict[tuple[ModelSpec, ChipSpec, perf.ShapeLike], PrefillMemo] = {}


def prefill_memo(model: ModelSpec, chip: ChipSpec, tp: perf.ShapeLike) -> PrefillMemo:
    """A prefill-time memo for an instance of ``model`` on ``chip`` with shape ``tp``: the
    shared one while the roofline times it, a fresh one while a measured profile does (a
    profile can be registered or dropped between runs, so its times are kept for one run)."""
    if profile.lookup(model, chip, as_shape(tp).chips) is not None:
        return {}
    return _MEMOS.setdefault((model, chip, tp), {})


# Context per sequence of the second point used to fit the decode-step lines (any large value).
LINE_PROBE_TOKENS = 1 << 20

# A decode step's lines: (compute at zero context, compute per context token, memory at zero,
# memory per context token, communication + launch overhead).
Lines = tuple[float, float, float, float, float]


class StepModel:
    """Iteration times of one instance (``model`` on ``chip`` with shape ``tp``)."""

    def __init__(
        self,
        model: ModelSpec,
        chip: ChipSpec,
        tp: perf.ShapeLike,
        memo: PrefillMemo | None = None,
    ) -> None:
        self.model = model
        self.chip = chip
        self.tp = tp
        self._step_lines: dict[int, Lines] = {}
        # Prefill times by (new, cached, batch); identical instances share one.
        self._prefill_memo = prefill_memo(model, chip, tp) if memo is None else memo
        # The roofline itself, while it times this kind of instance (no measured profile).
        shape = as_shape(tp)
        measured = profile.lookup(model, chip, shape.chips) is not None
        self._roofline = None if measured else roofline(model, chip, shape)

    def _lines(self, batch: int) -> Lines:
        """Compute and memory lines of a ``batch``-sequence step in the total context.

        For a fixed batch, the roofline's compute and memory terms are both affine in the total
        context (FLOPs add ``4 layers d_attn`` per context token, bytes add ``KV(1)``), and comm
        and overhead do not depend on it. So two ``perf`` evaluations per batch size give both
        lines: ``(c0, c_slope, m0, m_slope, comm + overhead)``.
        """
        lines = self._step_lines.get(batch)
        if lines is None:
            at_zero = perf.decode_step_time(self.model, self.chip, [0] * batch, self.tp)
            far = LINE_PROBE_TOKENS
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
        return lines

    def prefill_timing(self, new: int, cached: int, batch: int = 1) -> perf.Timing:
        """``perf.prefill_time`` on this instance, memoised (a small dict keyed by plain ints
        is far cheaper than hashing the frozen specs on every call)."""
        key = (new, cached, batch)
        timing = self._prefill_memo.get(key)
        if timing is None:
            if self._roofline is not None and new > 0 and cached >= 0:
                # ``perf.prefill_time`` past its checks and profile lookup.
                timing = self._roofline.prefill(new, cached, batch)
            else:
                timing = perf.prefill_time(self.model, self.chip, new, cached, self.tp, batch=batch)
            if len(self._prefill_memo) >= MEMO_LIMIT:
                self._prefill_memo.clear()
            self._prefill_memo[key] = timing
        return timing

    def prefill_s(self, new: int, cached: int) -> float:
        """Seconds of a one-sequence prefill of ``new`` tokens over ``cached`` here."""
        # The memo read here first (a call less on a hit: every arrival asks every P).
        timing = self._prefill_memo.get((new, cached, 1))
        if timing is None:
            timing = self.prefill_timing(new, cached)
        return timing.seconds

    def extend_s(self, tokens: int, context: int) -> float:
        """Seconds of ``perf.extend_time(tokens, context)`` here: by its definition, the
        one-sequence prefill of ``tokens`` over ``context``, so it shares that memo."""
        return self.prefill_timing(tokens, context).seconds

    def step_time(self, batch: int, total_context: int) -> float:
        """``perf.decode_step_time`` of ``batch`` sequences holding ``total_context`` tokens,
        from the lines of ``_lines`` (the same numbers to float rounding, far cheaper)."""
        return self.step_times(batch, total_context, total_context)[0]

    def step_times(self, batch: int, first: int, last: int) -> tuple[float, float]:
        """``step_time`` at two total contexts of one batch size (a decode segment's first
        and last steps), with one lookup of the lines."""
        lines = self._step_lines.get(batch)
        c0, c_slope, m0, m_slope, fixed = self._lines(batch) if lines is None else lines
        # ``max(compute, memory)`` written as a comparison with the same result (``max`` keeps
        # its first argument unless the second is greater): one call less per step time.
        compute, memory = c0 + c_slope * first, m0 + m_slope * first
        s_first = (memory if memory > compute else compute) + fixed
        if last == first:
            return s_first, s_first
        compute, memory = c0 + c_slope * last, m0 + m_slope * last
        return s_first, (memory if memory > compute else compute) + fixed

    def mixed_time(self, prefill: perf.Timing, batch: int, total_context: int) -> float:
        """One iteration of a decode step of ``batch`` sequences plus a prefill of ``prefill``.

        FLOPs add; the weights are read once (the prefill's read, which touches at least the
        experts the step does), plus the step's KV reads; communication adds; one launch.
        Pipelined (``prefill.fill_s`` > 0): the step goes round the pipeline as a decode step
        does, with the chunks riding in its micro-batches, and the chunks count only for the
        periods they occupy the first stage (``1 - fill_s / seconds`` of their pass,
        ``pdd_core.pipeline``); the weights are read at least once per micro-batch of the step
        (``m0``). The chunks finish ``fill_s`` after the iteration (``Instance``).
        """
        c0, c_slope, m0, m_slope, fixed = self._lines(batch)
        if prefill.fill_s:
            share = 1.0 - prefill.fill_s / prefill.seconds
            compute = share * prefill.compute_s + c0 + c_slope * total_context
            memory = max(share * prefill.memory_s, m0) + m_slope * total_context
            return max(compute, memory) + share * prefill.comm_s + fixed
        compute = prefill.compute_s + c0 + c_slope * total_context
        memory = prefill.memory_s + m_slope * total_context
        return max(compute, memory) + prefill.comm_s + fixed
