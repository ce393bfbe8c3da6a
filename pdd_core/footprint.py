"""What a model occupies: KV bytes, weight bytes a pass streams, KV capacity, smallest shape.

``perf`` times passes; this module sizes them. KV bytes per token come from
``ModelSpec.kv_bytes_per_token`` and the per-rank KV capacity from ``specs.shape`` (the layout
rules), so a transfer, a cache, a pass's memory term and the planner's fit check all read the
same bytes. ``perf`` re-exports every name here (``perf.kv_bytes`` and friends stay the API).
"""

from __future__ import annotations

from pdd_core.specs import Attention, ChipSpec, InstanceShape, ModelSpec
from pdd_core.specs.shape import (
    HBM_RESERVE_FRACTION,
    as_shape,
    kv_tokens_per_rank,
    valid_shapes,
)

ShapeLike = InstanceShape | int

# Kept for callers of the old API: HBM share reserved for activations (see specs.shape).
KV_RESERVE_FRACTION = HBM_RESERVE_FRACTION

# Largest tensor-parallel degree ``min_tp`` tries.
MAX_TP = 256


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


def kv_split(model: ModelSpec, tp: ShapeLike) -> int:
    """Over how many chips of one dp rank a token's KV is spread (no replication counted twice).

    GQA/MHA shard KV by head, at most ``kv_heads`` ways per stage; MLA keeps one latent for all
    heads, which TP attention copies to every rank, so it spreads only over the ``pp`` stages.
    (Data-parallel attention, ``dp > 1``, is how MLA deployments avoid the copies: each rank
    holds its own sequences.)
    """
    shape = as_shape(tp)
    if model.attention is Attention.MLA:
        return shape.pp
    return min(shape.tp, model.kv_heads) * shape.pp


def kv_capacity_tokens(model: ModelSpec, chip: ChipSpec, tp: ShapeLike) -> int:
    """Tokens of KV a whole instance holds after weights and the reserve: ``dp`` ranks of
    ``specs.shape.kv_tokens_per_rank`` each. Zero, never negative, when the weights do not fit.

    A request must fit in one rank (``kv_rank_tokens``), not merely in the instance.
    """
    shape = as_shape(tp)
    return shape.dp * kv_tokens_per_rank(model, chip, shape)


def kv_rank_tokens(model: ModelSpec, chip: ChipSpec, tp: ShapeLike) -> int:
    """Tokens of KV one data-parallel rank holds: the most one request may use."""
    return kv_tokens_per_rank(model, chip, as_shape(tp))


def min_tp(model: ModelSpec, chip: ChipSpec, kv_tokens: int = 0) -> int:
    """Smallest power-of-two ``tp`` whose HBM holds the weights, the reserve and some KV.

    Kept for callers that size a pure-TP instance; ``min_shape`` respects the scale-up domain
    and head counts. Raises ``ValueError`` past ``MAX_TP`` rather than looping.
    """
    tp = 1
    while tp <= MAX_TP:
        if kv_capacity_tokens(model, chip, tp) >= max(kv_tokens, 1):
            return tp
        tp *= 2
    raise ValueError(f"{model.id} with {kv_tokens} KV tokens does not fit on {MAX_TP} x {chip.id}")


def min_shape(model: ModelSpec, chip: ChipSpec, kv_tokens: int = 0) -> InstanceShape:
    """The valid shape with the fewest chips whose one rank holds ``kv_tokens`` tokens of KV.

    Only shapes that pack whole nodes count (a divisor or a multiple of ``chips_per_node``).
    Ties go to the larger tp (faster single-request prefill), then the shallower pipeline.
    Raises ``ValueError`` when no valid shape of up to 8 pipeline stages holds it.
    """
    need = max(kv_tokens, 1)
    node = chip.chips_per_node
    fits = [
        s
        for s in valid_shapes(model, chip)
        if kv_tokens_per_rank(model, chip, s) >= need
        and (s.chips % node == 0 or node % s.chips == 0)
    ]
    if not fits:
        raise ValueError(f"{model.id} with {kv_tokens} KV tokens has no valid shape on {chip.id}")
    return min(fits, key=lambda s: (s.chips, -s.tp, s.pp))
