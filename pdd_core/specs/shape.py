"""Instance shapes: how one serving instance lays a model over chips, and the rules it must obey.

An instance is ``tp x pp x dp`` chips (``chips``):

- ``tp`` tensor-parallel ranks split every attention head group and dense matmul. Its collectives
  (two all-reduces per layer) are latency-bound and issued every layer, so the group must stay
  inside one scale-up domain (an NVLink/UB node) and divide the head counts.
- ``pp`` pipeline stages each hold ``layers / pp`` layers. Crossing domains is what PP is for:
  stages exchange one activation per micro-batch, so the hop may run over the scale-out NIC.
- ``dp`` data-parallel attention ranks (MoE only) each run attention for their own sequences on
  ``tp`` chips and hold those sequences' KV; the expert layers are shared by all of them through
  expert parallelism (``ep = tp x dp``), as SGLang's ``--enable-dp-attention`` and DeepSeek's
  own deployment do. A request's KV lives on one dp rank, so it must fit in one rank.
- ``ep`` is 1 (experts split by TP inside each rank) or ``tp x dp`` (one expert group spanning
  the stage, all-to-all dispatch). When ``tp x dp`` exceeds the scale-up domain the all-to-all
  runs over the scale-out network, and ``perf`` charges it there.

``check_shape`` raises ``ShapeError`` whose ``rule`` (a ``ShapeRule``) names the rule broken, so
the planner and the control plane can react by kind, never by parsing text. Cost counts whole
nodes (``pool_nodes``): a pool of 3 four-chip instances on 8-chip nodes pays for 2 nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from pdd_core.specs.core import Attention, ChipSpec, ModelSpec, SpecError

# Share of HBM kept out of weights and KV for activations, CUDA graphs, allocator slack and
# framework buffers; vLLM's default gpu_memory_utilization is 0.9 (SGLang's mem_fraction_static
# is 0.8-0.9 depending on the GPU).
HBM_RESERVE_FRACTION = 0.10


class ShapeRule(StrEnum):
    """The rule a shape breaks (``ShapeError.rule``)."""

    POSITIVE = "positive-degrees"
    TP_HEADS = "tp-divides-attention-heads"
    TP_KV_HEADS = "tp-and-kv-heads"
    TP_DOMAIN = "tp-within-scaleup-domain"
    PP_LAYERS = "pp-at-most-layers"
    EP_GROUP = "ep-is-1-or-tp-x-dp"
    EP_EXPERTS = "ep-at-most-experts"
    DP_ATTENTION = "dp-attention-needs-moe-ep"
    WEIGHTS_FIT = "weights-fit-hbm"
    KV_PER_RANK = "request-kv-fits-one-rank"


class ShapeError(SpecError):
    """A shape breaks ``rule``; the message says by how much and what would satisfy it."""

    def __init__(self, rule: ShapeRule, message: str) -> None:
        super().__init__("shape", f"{message} [rule {rule.value}]")
        self.rule = rule
        self.detail = message


@dataclass(frozen=True, slots=True)
class InstanceShape:
    """``tp x pp x dp`` chips running one model replica (see the module docstring)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ShapeError(
                    ShapeRule.POSITIVE, f"{name} must be a positive integer, not {value!r}"
                )

    @property
    def chips(self) -> int:
        """Chips in one instance."""
        return self.tp * self.pp * self.dp

    @property
    def stage_chips(self) -> int:
        """Chips in one pipeline stage (the expert-parallel group when ``ep > 1``)."""
        return self.tp * self.dp

    def label(self) -> str:
        parts = [f"tp{self.tp}"]
        if self.pp > 1:
            parts.append(f"pp{self.pp}")
        if self.dp > 1:
            parts.append(f"dp{self.dp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        return "x".join(parts)

    def to_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep}


def as_shape(shape: InstanceShape | int) -> InstanceShape:
    """An ``InstanceShape`` from a shape or a bare tensor-parallel degree (the old ``tp=``)."""
    if isinstance(shape, InstanceShape):
        return shape
    if isinstance(shape, bool) or not isinstance(shape, int) or shape < 1:
        raise ValueError(f"tp: must be a positive integer, got {shape!r}")
    return InstanceShape(tp=shape)


def kv_replicas(model: ModelSpec, shape: InstanceShape) -> int:
    """Copies of each token's KV inside one dp rank's tensor-parallel group, per layer.

    GQA/MHA shard KV by head: ``tp`` ranks share ``kv_heads`` heads, so when ``tp > kv_heads``
    each head is replicated ``tp / kv_heads`` times. MLA keeps one latent per token for all heads,
    and TP attention keeps a full copy on every rank (``tp`` copies): the reason large MLA
    deployments use data-parallel attention (``tp = 1`` per rank, ``dp`` ranks).
    """
    if model.attention is Attention.MLA:
        return shape.tp
    return max(1, shape.tp // model.kv_heads)


def kv_bytes_per_token_per_chip(model: ModelSpec, shape: InstanceShape) -> float:
    """HBM bytes one token of context costs each chip of the dp rank holding it."""
    copies = kv_replicas(model, shape)
    return model.kv_bytes_per_token * copies / (shape.tp * shape.pp)


def weight_bytes_per_chip(model: ModelSpec, shape: InstanceShape) -> float:
    """Weights one chip holds: dense/attention shards over ``tp x pp`` (replicated on each dp
    rank), routed experts over the stage's ``tp x dp`` chips and ``pp`` stages."""
    routed = model.routed_expert_params * model.weight_bytes_per_param
    dense = model.weight_bytes - routed
    return dense / (shape.tp * shape.pp) + routed / (shape.stage_chips * shape.pp)


def kv_tokens_per_rank(model: ModelSpec, chip: ChipSpec, shape: InstanceShape) -> int:
    """Tokens of KV one dp rank holds after weights and the HBM reserve (0 when none fit)."""
    free = chip.hbm_bytes * (1.0 - HBM_RESERVE_FRACTION) - weight_bytes_per_chip(model, shape)
    if free <= 0:
        return 0
    return math.floor(free / kv_bytes_per_token_per_chip(model, shape))


def check_shape(model: ModelSpec, chip: ChipSpec, shape: InstanceShape) -> None:
    """Raise ``ShapeError`` naming the first rule ``shape`` breaks for ``model`` on ``chip``."""
    tp = shape.tp
    if model.attention_heads % tp:
        raise ShapeError(
            ShapeRule.TP_HEADS,
            f"tp {tp} does not divide {model.id}'s {model.attention_heads} attention heads",
        )
    if model.attention is not Attention.MLA and model.kv_heads % tp and tp % model.kv_heads:
        raise ShapeError(
            ShapeRule.TP_KV_HEADS,
            f"tp {tp} neither divides nor is a multiple of {model.id}'s {model.kv_heads} KV heads",
        )
    if tp > chip.scaleup_domain or chip.scaleup_domain % tp:
        raise ShapeError(
            ShapeRule.TP_DOMAIN,
            f"tp {tp} does not fit one {chip.id} scale-up domain of {chip.scaleup_domain} chips "
            "(cross domains with pp or ep)",
        )
    if shape.pp > model.layers:
        raise ShapeError(
            ShapeRule.PP_LAYERS, f"pp {shape.pp} exceeds {model.id}'s {model.layers} layers"
        )
    if shape.ep > 1 and (not model.is_moe or shape.ep != shape.stage_chips):
        raise ShapeError(
            ShapeRule.EP_GROUP,
            f"ep {shape.ep} must be 1 or tp x dp = {shape.stage_chips} on a MoE model",
        )
    if shape.ep > model.moe_experts > 0:
        raise ShapeError(
            ShapeRule.EP_EXPERTS, f"ep {shape.ep} exceeds {model.id}'s {model.moe_experts} experts"
        )
    if shape.dp > 1 and (not model.is_moe or shape.ep != shape.stage_chips):
        raise ShapeError(
            ShapeRule.DP_ATTENTION,
            f"dp {shape.dp} (data-parallel attention) needs a MoE model with ep = tp x dp "
            f"= {shape.stage_chips}; a dense model scales out with more instances",
        )
    if kv_tokens_per_rank(model, chip, shape) < 1:
        per_chip = weight_bytes_per_chip(model, shape) / 1e9
        usable = chip.hbm_bytes * (1 - HBM_RESERVE_FRACTION) / 1e9
        raise ShapeError(
            ShapeRule.WEIGHTS_FIT,
            f"{model.id} needs {per_chip:.1f} GB of weights per chip at {shape.label()}, "
            f"{chip.id} has {usable:.1f} GB usable",
        )


def check_request_fits(model: ModelSpec, chip: ChipSpec, shape: InstanceShape, tokens: int) -> None:
    """Raise ``ShapeError`` when a request of ``tokens`` tokens of KV cannot live on one rank."""
    room = kv_tokens_per_rank(model, chip, shape)
    if tokens > room:
        raise ShapeError(
            ShapeRule.KV_PER_RANK,
            f"a request of {tokens:,} tokens needs more KV than one dp rank of {shape.label()} "
            f"on {chip.id} holds ({room:,} tokens)",
        )


def pool_nodes(chip: ChipSpec, shape: InstanceShape, instances: int) -> int:
    """Whole nodes a pool of ``instances`` instances occupies (instances may share a node)."""
    if instances <= 0:
        return 0
    return math.ceil(instances * shape.chips / chip.chips_per_node)


def pool_cost_per_hour(chip: ChipSpec, shape: InstanceShape, instances: int) -> float:
    """Cost of a pool, counting whole nodes: ``nodes x chips_per_node x price``."""
    return pool_nodes(chip, shape, instances) * chip.chips_per_node * chip.price_per_hour


def valid_shapes(
    model: ModelSpec, chip: ChipSpec, *, max_chips: int | None = None, max_pp: int = 8
) -> list[InstanceShape]:
    """Every valid shape of ``model`` on ``chip`` up to ``max_chips`` chips per instance.

    TP runs over the divisors of the scale-up domain; PP over 1..``max_pp``; MoE models also get
    data-parallel attention with expert parallelism over the stage (``dp`` powers of two up to
    64). Sorted by chips, then tp, pp, dp.
    """
    limit = max_chips if max_chips is not None else chip.scaleup_domain * max_pp
    domain = chip.scaleup_domain
    tps = [t for t in range(1, domain + 1) if domain % t == 0]
    dps = [1]
    if model.is_moe:
        dps += [2, 4, 8, 16, 32, 64]
    found: list[InstanceShape] = []
    for tp in tps:
        for dp in dps:
            ep = tp * dp if dp > 1 else 1
            for pp in range(1, max_pp + 1):
                shape = InstanceShape(tp=tp, pp=pp, dp=dp, ep=ep)
                if shape.chips > limit:
                    break
                try:
                    check_shape(model, chip, shape)
                except ShapeError:
                    continue
                found.append(shape)
    return sorted(found, key=lambda s: (s.chips, s.tp, s.pp, s.dp))
