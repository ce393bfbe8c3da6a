"""Roofline timing of one forward pass: prefill, decode step, extend, and KV capacity.

The simulator, the planner, the router and the roofline-timed engine all need "how long does this
pass take on that chip", and DOMAIN.md section 5 gives the formulas. They live here once, each
written next to its formula, so every time the product shows can be traced to an input in
``specs.py`` and a line below.

Modelling conventions (shared by every function):

- An instance is ``tp`` identical chips. FLOPs and weight bytes split evenly over them; the KV
  cache splits over ``kv_split(model, tp)`` of them (see there).
- A pass costs ``max(compute, memory) + comm + overhead``: compute and HBM traffic overlap (the
  roofline), tensor-parallel all-reduces do not (conservative: real kernels overlap a part).
- ``Timing.bound`` names the largest of the compute, memory and comm terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pdd_core import profile
from pdd_core.specs import Attention, ChipSpec, ModelSpec

Bound = Literal["compute", "memory", "comm"]

# Activations cross the scale-up link in BF16 (2 bytes) in every mainstream serving engine,
# whatever the weight format.
ACTIVATION_BYTES = 2.0

# Fixed cost per layer of a forward pass that no roofline term covers: kernel launches,
# synchronisation and scheduler work (about 10 kernels of ~1 us each per layer with CUDA graphs).
# It is what keeps a batch-1 decode step of a small model from being predicted at a few
# microseconds; measured small-batch decode steps sit about 0.5-1 ms above their roofline.
LAUNCH_OVERHEAD_PER_LAYER_S = 10e-6

# Latency of one small-message all-reduce inside a scale-up (NVLink-class) domain: NCCL ring
# all-reduces of a few KB take on the order of 10 us, which dominates decode-time TP traffic.
ALLREDUCE_LATENCY_S = 10e-6

# Share of HBM kept out of the KV pool for activations, CUDA graphs, allocator slack and
# framework buffers; mirrors vLLM's default gpu_memory_utilization of 0.9 (DOMAIN.md section 5:
# "HBM capacity minus weights minus activation reserve").
KV_RESERVE_FRACTION = 0.10

# Largest tensor-parallel degree ``min_tp`` tries (a scale-up domain of 256 chips is already
# beyond any shipping system; past it the model does not fit, and we say so).
MAX_TP = 256


@dataclass(frozen=True, slots=True)
class Timing:
    """Time of one forward pass with the roofline terms it came from.

    ``seconds = max(compute_s, memory_s) + comm_s + overhead_s``; keeping the terms lets a table
    cell show which one binds and lets tests check each formula on its own.
    """

    seconds: float
    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    bound: Bound


ZERO_TIMING = Timing(0.0, 0.0, 0.0, 0.0, 0.0, "compute")


def kv_bytes(model: ModelSpec, tokens: float) -> float:
    """Bytes of KV cache ``tokens`` tokens hold (DOMAIN.md section 5, ``kv_B x L``).

    GQA/MHA: ``2 x layers x kv_heads x head_dim x bytes``; MLA: ``layers x (kv_lora_rank +
    rope_dim) x bytes`` per token, both from ``ModelSpec.kv_bytes_per_token``. Transfers, cache
    sizing and the memory term of every pass read KV through this one function.
    """
    if tokens < 0:
        raise ValueError(f"tokens: must be non-negative, got {tokens!r}")
    return model.kv_bytes_per_token * tokens


def touched_experts(model: ModelSpec, tokens: float) -> float:
    """Expected distinct routed experts per MoE layer that a pass over ``tokens`` tokens touches.

    Assumes uniform, independent routing: each token picks ``k`` of ``E`` experts, so one expert
    is missed by a token with probability ``1 - k/E`` and by all of them with ``(1 - k/E)^b``;
    the expectation is ``E x (1 - (1 - k/E)^b)``. Real routers are skewed, which touches fewer
    experts, so this slightly over-estimates decode weight traffic. Zero for a dense model.
    """
    if not model.is_moe or tokens <= 0:
        return 0.0
    experts = model.moe_experts
    miss_all: float = (1.0 - model.moe_top_k / experts) ** tokens
    return experts * (1.0 - miss_all)


def active_weight_bytes(model: ModelSpec, tokens: float) -> float:
    """Weight bytes a pass over ``tokens`` tokens must stream from HBM (whole instance).

    Dense: all weights. MoE (DOMAIN.md section 5, "active weight bytes grow with batch"):
    ``non-expert bytes + routed_params / E x touched_experts(b) x bytes/param``, where non-expert
    params (attention, shared experts, embeddings) are ``total - routed``. At ``b = 1`` this is
    exactly ``active_params x bytes/param``; for a long prefill it tends to all weights.
    """
    if not model.is_moe:
        return model.weight_bytes
    routed = model.routed_expert_params
    non_expert = model.total_params_b * 1e9 - routed
    per_expert = routed / model.moe_experts
    touched = touched_experts(model, max(tokens, 1.0))
    return (non_expert + per_expert * touched) * model.weight_bytes_per_param


def kv_split(model: ModelSpec, tp: int) -> int:
    """Over how many of an instance's ``tp`` chips the KV cache is spread.

    GQA/MHA shard KV by head, so at most ``kv_heads`` ways; beyond that each KV head is
    replicated (``tp / kv_heads`` copies). MLA has one latent shared by all heads, which pure head
    TP would copy to every chip; large MLA deployments avoid that with data-parallel attention
    (each chip holds its own sequences), so we assume the KV spreads over all ``tp`` chips.
    """
    _check_tp(tp)
    if model.attention is Attention.MLA:
        return tp
    return min(tp, model.kv_heads)


def kv_capacity_tokens(model: ModelSpec, chip: ChipSpec, tp: int) -> int:
    """Tokens of KV an instance of ``tp`` chips can hold after weights and the reserve.

    DOMAIN.md section 5: ``(tp x HBM x (1 - KV_RESERVE_FRACTION) - weight bytes) /
    (kv_bytes_per_token x tp / kv_split)``; the last factor is the replication of GQA heads when
    ``tp > kv_heads`` (1 otherwise). It bounds decode batch x context and the size of a
    decode-side radix cache. Zero, never negative, when the weights do not fit.
    """
    free = tp * chip.hbm_bytes * (1.0 - KV_RESERVE_FRACTION) - model.weight_bytes
    if free <= 0:
        return 0
    per_token = model.kv_bytes_per_token * tp / kv_split(model, tp)
    return math.floor(free / per_token)


def min_tp(model: ModelSpec, chip: ChipSpec, kv_tokens: int = 0) -> int:
    """Smallest power-of-two ``tp`` whose HBM holds the weights, the reserve and some KV.

    With ``kv_tokens`` the instance must also hold that many tokens of KV (a batch x context
    it is meant to serve). Power-of-two because that is how tensor-parallel groups are formed
    (head counts and scale-up domains divide by it). Raises ``ValueError`` past ``MAX_TP``
    rather than looping.
    """
    tp = 1
    while tp <= MAX_TP:
        if kv_capacity_tokens(model, chip, tp) >= max(kv_tokens, 1):
            return tp
        tp *= 2
    raise ValueError(f"{model.id} with {kv_tokens} KV tokens does not fit on {MAX_TP} x {chip.id}")


def tp_comm_time(model: ModelSpec, chip: ChipSpec, tokens: float, tp: int) -> float:
    """Tensor-parallel communication of one forward pass over ``tokens`` tokens.

    Megatron-style TP all-reduces the activations twice per layer (after attention and after the
    MLP). A ring all-reduce of ``S`` bytes moves ``2 (tp-1)/tp x S`` bytes per chip, with
    ``S = tokens x hidden x ACTIVATION_BYTES``, over the scale-up link (``scaleup_gbytes_per_s``
    is per direction, which is what a ring uses), plus a fixed
    ``ALLREDUCE_LATENCY_S`` per all-reduce: ``layers x 2 x (2 (tp-1)/tp x S / scaleup_BW +
    latency)``. Zero for ``tp = 1``.
    """
    _check_tp(tp)
    if tp == 1 or tokens <= 0:
        return 0.0
    message = tokens * model.hidden_size * ACTIVATION_BYTES
    per_allreduce = 2.0 * (tp - 1) / tp * message / chip.scaleup_bytes_per_s + ALLREDUCE_LATENCY_S
    return model.layers * 2 * per_allreduce


def launch_overhead(model: ModelSpec) -> float:
    """Fixed cost of one forward pass: ``layers x LAUNCH_OVERHEAD_PER_LAYER_S``."""
    return model.layers * LAUNCH_OVERHEAD_PER_LAYER_S


def prefill_time(
    model: ModelSpec,
    chip: ChipSpec,
    new_tokens: int,
    cached_tokens: int = 0,
    tp: int = 1,
    *,
    batch: int = 1,
) -> Timing:
    """One prefill pass: ``batch`` sequences, each ``new_tokens`` new over ``cached_tokens`` cached.

    DOMAIN.md section 5, with ``L_new = new_tokens`` and ``L_c = cached_tokens``: the compute
    term is ``(2 N_active L_new + 4 layers d_attn L_new (L_c + L_new/2)) x batch /
    (eta_c P tp)``, where ``d_attn = attention_heads x head_dim`` and the second part is causal
    attention (each new token scores against the cached ones and, on average, half the new ones;
    QK^T and PV at 2 FLOPs per multiply-add each). The memory term is ``(active weight bytes /
    tp + batch (KV(L_c) + KV(L_new)) / kv_split) / (eta_m BW)``: weights once, cached KV read,
    new KV written. TP communication and launch overhead are added. No new tokens means no pass.
    """
    _check_counts(new_tokens=new_tokens, cached_tokens=cached_tokens, batch=batch)
    if new_tokens == 0:
        return ZERO_TIMING
    measured = profile.lookup(model, chip, tp)  # a measured profile replaces the roofline
    if measured is not None:
        return measured.timing(measured.prefill_seconds(new_tokens, batch))
    # Sum over the batch of L_new (L_c + L_new/2): the query-key pairs of causal attention.
    attention_pairs = batch * new_tokens * (cached_tokens + new_tokens / 2)
    return _forward(
        model,
        chip,
        tokens=batch * new_tokens,
        attention_pairs=attention_pairs,
        kv_tokens=batch * (cached_tokens + new_tokens),
        tp=tp,
    )


def extend_time(model: ModelSpec, chip: ChipSpec, tokens: int, context: int, tp: int = 1) -> Timing:
    """Recompute of ``tokens`` tokens on top of a cached ``context`` (DOMAIN.md section 4).

    This is the token-ID handoff: MD rebuilds the KV of RLD's eager tokens itself. DOMAIN.md
    section 5 defines it as the prefill formula with ``L_new = k`` and ``L_c = c``, so it is
    ``prefill_time`` with those arguments; for small ``k`` it is memory-bound and, at ``k = 1``,
    equals ``decode_step_time([context])``.
    """
    return prefill_time(model, chip, new_tokens=tokens, cached_tokens=context, tp=tp)


def decode_step_time(
    model: ModelSpec, chip: ChipSpec, context_lengths: Sequence[int], tp: int = 1
) -> Timing:
    """One decode step for a batch whose sequences have the given contexts ``c_i``.

    DOMAIN.md section 5: ``max(2 N_active b / (eta_c P tp), (active weight bytes(b) / tp +
    sum_i KV(c_i) / kv_split) / (eta_m BW)) + comm + launch overhead``, with ``b`` the batch.
    Two deliberate additions keep it the ``L_new = 1`` case of the prefill formula (so a
    one-token extend and a decode step agree): the compute term also counts attention,
    ``4 layers d_attn (c_i + 1/2)`` per sequence, which at long contexts is a fifth or more of
    the FLOPs; and the memory term counts writing the step's own KV, ``KV(b)``.
    """
    batch = len(context_lengths)
    if batch == 0:
        raise ValueError("context_lengths: a decode step needs at least one sequence")
    total_context = 0
    for context in context_lengths:
        if context < 0:
            raise ValueError(f"context_lengths: must be non-negative, got {context!r}")
        total_context += context
    return _decode(model, chip, batch, total_context, tp)


def decode_step_time_uniform(
    model: ModelSpec, chip: ChipSpec, batch: int, context: int, tp: int = 1
) -> Timing:
    """``decode_step_time`` for ``batch`` sequences that all have ``context`` tokens.

    The planner sweeps batch sizes; this avoids building a list per evaluation.
    """
    _check_counts(batch=batch, context=context)
    if batch == 0:
        raise ValueError("batch: a decode step needs at least one sequence")
    return _decode(model, chip, batch, batch * context, tp)


def _decode(model: ModelSpec, chip: ChipSpec, batch: int, total_context: int, tp: int) -> Timing:
    measured = profile.lookup(model, chip, tp)  # a measured profile replaces the roofline
    if measured is not None:
        return measured.timing(measured.decode_seconds(batch))
    # Each sequence adds one token over c_i cached: L_new (L_c + L_new/2) = c_i + 1/2.
    return _forward(
        model,
        chip,
        tokens=batch,
        attention_pairs=total_context + batch / 2,
        kv_tokens=total_context + batch,
        tp=tp,
    )


def _forward(
    model: ModelSpec,
    chip: ChipSpec,
    *,
    tokens: float,
    attention_pairs: float,
    kv_tokens: float,
    tp: int,
) -> Timing:
    """The shared roofline of every pass (see the module docstring for the conventions)."""
    _check_tp(tp)
    d_attn = model.attention_heads * model.head_dim
    # 2 FLOPs per parameter per token for the matmuls, 4 d_attn per layer per attention pair.
    flops = 2.0 * model.active_params_b * 1e9 * tokens + 4.0 * model.layers * d_attn * (
        attention_pairs
    )
    compute_s = flops / (chip.compute_efficiency * chip.peak_flops * tp)
    weight_bytes = active_weight_bytes(model, tokens) / tp
    bytes_per_chip = weight_bytes + kv_bytes(model, kv_tokens) / kv_split(model, tp)
    memory_s = bytes_per_chip / (chip.memory_efficiency * chip.hbm_bytes_per_s)
    comm_s = tp_comm_time(model, chip, tokens, tp)
    overhead_s = launch_overhead(model)
    bound: Bound = "compute"
    if memory_s > compute_s:
        bound = "memory"
    if comm_s > max(compute_s, memory_s):
        bound = "comm"
    return Timing(
        seconds=max(compute_s, memory_s) + comm_s + overhead_s,
        compute_s=compute_s,
        memory_s=memory_s,
        comm_s=comm_s,
        overhead_s=overhead_s,
        bound=bound,
    )


def _check_tp(tp: int) -> None:
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp: must be a positive integer, got {tp!r}")


def _check_counts(**counts: int) -> None:
    for name, value in counts.items():
        if value < 0:
            raise ValueError(f"{name}: must be non-negative, got {value!r}")
