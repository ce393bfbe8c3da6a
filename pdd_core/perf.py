"""Roofline timing of one forward pass: prefill, decode step and extend (sizes: ``footprint``).

The simulator, the planner, the router and the roofline-timed engine all need "how long does this
pass take on that chip", and DOMAIN.md section 5 gives the formulas. They live here once, each
written next to its formula, so every time the product shows can be traced to an input in
``specs`` and a line below (the roofline they share, with its spec constants read once per
instance kind, is ``roofline.Roofline``). ``docs/physics.md`` explains each choice and compares
the results with published measurements.

Modelling conventions (shared by every function):

- An instance has an ``InstanceShape`` (``tp x pp x dp`` chips, ``ep`` for MoE); every function
  also takes a bare ``tp`` int (``InstanceShape(tp=tp)``). ``specs.shape`` holds the layout rules
  (which weights and KV each chip holds); this module only times passes.
- A pipeline stage costs ``max(compute, memory) + comm + overhead`` for one micro-batch: compute
  and HBM traffic overlap (the roofline). Tensor-parallel all-reduces do *not* overlap: the next
  layer's norm needs their result, and vLLM/SGLang issue them in stream order (CUDA graphs in
  decode); their cost is the measured one (``allreduce_time``). Expert-parallel all-to-all *does*
  overlap with compute: DeepSeek's serving and SGLang's two-batch overlap split a batch into two
  micro-batches so one computes while the other communicates; only the excess shows.
- ``pp`` stages (``pdd_core.pipeline``, the one home of this): a prefill of ``m`` micro-batches
  lasts ``m + pp - 1`` stage times plus its hand-offs (one request's latency), of which the
  instance's first stage is busy for ``m`` (``Timing.fill_s`` is the rest: engines keep up to
  ``pp`` iterations in flight); a decode step sends ``min(batch, pp)`` micro-batches round the
  pipeline, so it takes ``pp`` stage times of one micro-batch (each stage re-reading its weights
  per micro-batch). A hand-off crosses the scale-out network where the two stages' ranks sit in
  different scale-up domains, and the scale-up fabric otherwise.
- ``Timing.bound`` names the largest of the compute, memory and comm terms.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdd_core import profile
from pdd_core.collectives import ACTIVATION_BYTES, allreduce_time
from pdd_core.footprint import (
    KV_RESERVE_FRACTION,
    MAX_TP,
    ShapeLike,
    active_weight_bytes,
    kv_bytes,
    kv_capacity_tokens,
    kv_rank_tokens,
    kv_split,
    min_shape,
    min_tp,
    touched_experts,
)
from pdd_core.roofline import (
    ELEMENTWISE_VECTORS_PER_LAYER,
    LAUNCH_OVERHEAD_PER_LAYER_S,
    PP_CHUNK_TOKENS,
    Bound,
    Timing,
    attention_flops_per_pair,
    roofline,
)
from pdd_core.specs import ChipSpec, InstanceShape, ModelSpec
from pdd_core.specs.shape import as_shape

# Sizes live in ``footprint`` and the forward-pass roofline in ``roofline``; they stay importable
# from here (the public API of ``perf``).
__all__ = [
    "ELEMENTWISE_VECTORS_PER_LAYER",
    "KV_RESERVE_FRACTION",
    "LAUNCH_OVERHEAD_PER_LAYER_S",
    "MAX_TP",
    "PP_CHUNK_TOKENS",
    "ZERO_TIMING",
    "Bound",
    "ShapeLike",
    "Timing",
    "active_weight_bytes",
    "attention_flops_per_pair",
    "decode_step_time",
    "decode_step_time_uniform",
    "extend_time",
    "kv_bytes",
    "kv_capacity_tokens",
    "kv_rank_tokens",
    "kv_split",
    "launch_overhead",
    "min_shape",
    "min_tp",
    "prefill_time",
    "touched_experts",
    "tp_comm_time",
]

ZERO_TIMING = Timing(0.0, 0.0, 0.0, 0.0, 0.0, "compute")


def tp_comm_time(model: ModelSpec, chip: ChipSpec, tokens: float, tp: ShapeLike) -> float:
    """Tensor-parallel all-reduces of one pass over ``tokens`` tokens (whole model, one rank).

    Megatron-style TP all-reduces the activations twice per layer (after attention and after the
    MLP): ``layers x 2 x allreduce_time(tokens x hidden x 2 B)``. Zero for ``tp = 1``.
    """
    shape = as_shape(tp)
    if shape.tp == 1 or tokens <= 0:
        return 0.0
    message = tokens * model.hidden_size * ACTIVATION_BYTES
    return model.layers * 2 * allreduce_time(chip, shape.tp, message)


def launch_overhead(model: ModelSpec) -> float:
    """Fixed cost of one forward pass: ``layers x LAUNCH_OVERHEAD_PER_LAYER_S``."""
    return model.layers * LAUNCH_OVERHEAD_PER_LAYER_S


def prefill_time(
    model: ModelSpec,
    chip: ChipSpec,
    new_tokens: int,
    cached_tokens: int = 0,
    tp: ShapeLike = 1,
    *,
    batch: int = 1,
) -> Timing:
    """One prefill pass: ``batch`` sequences, each ``new_tokens`` new over ``cached_tokens`` cached.

    DOMAIN.md section 5, with ``L_new = new_tokens`` and ``L_c = cached_tokens``: the compute
    term is ``(2 N_active L_new + 4 layers d_attn L_new (L_c + L_new/2)) x batch /
    (eta_c P chips)``, where ``d_attn = attention_heads x head_dim`` and the second part is causal
    attention (each new token scores against the cached ones and, on average, half the new ones;
    QK^T and PV at 2 FLOPs per multiply-add each). The memory term reads each chip's weights,
    the cached KV and writes the new KV, plus the element-wise traffic. TP all-reduces, visible
    all-to-all, pipeline hand-offs and launch overhead are added. No new tokens means no pass.
    """
    _check_counts(new_tokens=new_tokens, cached_tokens=cached_tokens, batch=batch)
    if new_tokens == 0:
        return ZERO_TIMING
    measured = profile.lookup(model, chip, as_shape(tp).chips)  # replaces the roofline
    if measured is not None:
        return measured.timing(measured.prefill_seconds(new_tokens, batch))
    return roofline(model, chip, as_shape(tp)).prefill(new_tokens, cached_tokens, batch)


def extend_time(
    model: ModelSpec, chip: ChipSpec, tokens: int, context: int, tp: ShapeLike = 1
) -> Timing:
    """Recompute of ``tokens`` tokens on top of a cached ``context`` (DOMAIN.md section 4).

    This is the token-ID handoff: MD rebuilds the KV of RLD's eager tokens itself. DOMAIN.md
    section 5 defines it as the prefill formula with ``L_new = k`` and ``L_c = c``, so it is
    ``prefill_time`` with those arguments; for small ``k`` it is memory-bound and, at ``k = 1``,
    equals ``decode_step_time([context])``.
    """
    return prefill_time(model, chip, new_tokens=tokens, cached_tokens=context, tp=tp)


def decode_step_time(
    model: ModelSpec, chip: ChipSpec, context_lengths: Sequence[int], tp: ShapeLike = 1
) -> Timing:
    """One decode step for a batch whose sequences have the given contexts ``c_i``.

    DOMAIN.md section 5: ``max(2 N_active b / (eta_c P chips), (weights per chip(b) +
    sum_i KV(c_i) per chip) / (eta_m BW)) + comm + launch overhead``, with ``b`` the batch: at
    large batch the step is bound by the weights plus every sequence's KV reads. It is the
    ``L_new = 1`` case of the prefill formula (so a one-token extend and a decode step agree):
    the compute term counts attention, ``4 layers d_attn (c_i + 1/2)`` per sequence, and the
    memory term counts writing the step's own KV.
    """
    batch = len(context_lengths)
    if batch == 0:
        raise ValueError("context_lengths: a decode step needs at least one sequence")
    total_context = 0
    for context in context_lengths:
        if context < 0:
            raise ValueError(f"context_lengths: must be non-negative, got {context!r}")
        total_context += context
    return _decode(model, chip, batch, total_context, as_shape(tp))


def decode_step_time_uniform(
    model: ModelSpec, chip: ChipSpec, batch: int, context: int, tp: ShapeLike = 1
) -> Timing:
    """``decode_step_time`` for ``batch`` sequences that all have ``context`` tokens.

    The planner sweeps batch sizes; this avoids building a list per evaluation.
    """
    _check_counts(batch=batch, context=context)
    if batch == 0:
        raise ValueError("batch: a decode step needs at least one sequence")
    return _decode(model, chip, batch, batch * context, as_shape(tp))


def _decode(
    model: ModelSpec, chip: ChipSpec, batch: int, total_context: int, shape: InstanceShape
) -> Timing:
    measured = profile.lookup(model, chip, shape.chips)  # a measured profile replaces the roofline
    if measured is not None:
        return measured.timing(measured.decode_seconds(batch))
    # Each sequence adds one token over c_i cached: L_new (L_c + L_new/2) = c_i + 1/2.
    return roofline(model, chip, shape).forward(
        tokens=batch,
        attention_pairs=total_context + batch / 2,
        kv_tokens=total_context + batch,
        prefill=False,
        absorbed=True,
    )


def _check_counts(**counts: int) -> None:
    for name, value in counts.items():
        if value < 0:
            raise ValueError(f"{name}: must be non-negative, got {value!r}")
