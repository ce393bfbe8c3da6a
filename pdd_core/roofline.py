"""The roofline of one forward pass, with its spec constants read once per instance kind.

``perf``'s passes (prefill, decode step, extend) all end in one roofline over a micro-batch:
``perf.prefill_time`` and ``perf.decode_step_time`` give it the pass's tokens, query-key pairs
and KV, and this module times it (``perf``'s module docstring states the conventions). A
``Roofline`` holds everything that depends only on the model, the chip and the instance shape
(spec properties, products of them, the all-reduce curve), so a pass costs the arithmetic that
depends on its sizes alone: the simulator times tens of thousands of distinct prefill sizes per
run. Every constant is the same sub-expression, in the same order, as the formula it comes
from, so the figures are bit-for-bit those of evaluating the formulas in full.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

from pdd_core.collectives import ACTIVATION_BYTES, AllReduce, alltoall_time
from pdd_core.pipeline import StageLinks, decode_pass, prefill_pass, stage_links
from pdd_core.specs import Attention, ChipSpec, InstanceShape, ModelSpec
from pdd_core.specs.shape import kv_bytes_per_token_per_chip
from pdd_core.tuples import new_tuple

Bound = Literal["compute", "memory", "comm"]

# Fixed cost per layer of a forward pass that no roofline term covers: kernel launches,
# synchronisation and scheduler work (about 10 kernels of ~1 us each per layer with CUDA graphs).
# It is what keeps a batch-1 decode step of a small model from being predicted at a few
# microseconds; measured small-batch decode steps sit about 0.5-1 ms above their roofline.
LAUNCH_OVERHEAD_PER_LAYER_S = 10e-6

# Element-wise traffic per layer that the matmul roofline misses, in hidden-sized BF16 vectors
# per token: two RMSNorms (read + write: 4), two residual adds (read 2, write 1: 6), rotary and
# the gated activation's hidden-sized part (2). Each TP rank does it for all of its rank's tokens.
ELEMENTWISE_VECTORS_PER_LAYER = 12

# A pipelined prefill moves through the stages in micro-batches of this many tokens; only used
# when pp > 1. Large enough that a micro-batch's matmuls stay compute-bound on every catalog
# chip (each micro-batch re-reads its stage's weights), small enough that a long prefill keeps
# every stage busy.
PP_CHUNK_TOKENS = 4096


class Timing(NamedTuple):
    """Time of one forward pass with the roofline terms it came from.

    ``seconds = max(compute_s, memory_s) + comm_s + overhead_s``; keeping the terms lets a table
    cell show which one binds and lets tests check each formula on its own. ``hidden_comm_s``
    is communication that overlapped with compute (expert all-to-all) and so is not in
    ``seconds``. ``seconds`` is the pass's latency; ``fill_s`` is its last part, when a
    pipelined instance's first stage is already free for the next iteration (``pipeline``;
    0 without pipeline parallelism), so ``seconds - fill_s`` is what the pass occupies.
    A named tuple: immutable, and built in a fraction of a frozen dataclass's
    time (the simulator times tens of thousands of distinct passes per run).
    """

    seconds: float
    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    bound: Bound
    hidden_comm_s: float = 0.0
    fill_s: float = 0.0


def attention_flops_per_pair(model: ModelSpec, *, absorbed: bool) -> float:
    """FLOPs of one query-key pair in one layer: QK^T and PV, 2 FLOPs per multiply-add.

    MHA/GQA, and MLA in its prefill form (keys and values decompressed per head), score over
    ``head_dim``: ``4 x heads x head_dim``. MLA decode runs in the absorbed form (DeepSeek-V2
    section 2.1.2; FlashMLA): every head scores against the shared latent plus the RoPE key and
    reads values from the latent, ``2 x heads x (2 kv_lora_rank + rope_dim)``, about 2-3x the
    prefill form; it is why large-batch MLA decode is compute-bound (FlashMLA's README reports
    580 TFLOP/s compute-bound decode on H800). ``absorbed`` is set for one-token passes.
    """
    if absorbed and model.attention is Attention.MLA:
        return 2.0 * model.attention_heads * (2 * model.kv_lora_rank + model.rope_dim)
    return 4.0 * model.attention_heads * model.head_dim


class Roofline:
    """The forward-pass roofline of ``model`` on ``chip`` with ``shape`` (``forward``)."""

    __slots__ = (
        "_compute_rate",
        "_dense_per_chip",
        "_expert_chips",
        "_experts",
        "_kv_per_token",
        "_layer_flops",
        "_links",
        "_matmul_flops",
        "_memory_rate",
        "_miss_per_token",
        "_per_expert",
        "_stage_layers",
        "allreduce",
        "chip",
        "model",
        "overhead_s",
        "shape",
    )

    def __init__(self, model: ModelSpec, chip: ChipSpec, shape: InstanceShape) -> None:
        self.model = model
        self.chip = chip
        self.shape = shape
        pp = shape.pp
        self._stage_layers = model.layers / pp
        self._matmul_flops = 2.0 * model.active_params_b * 1e9
        # model.layers x attention_flops_per_pair, by ``absorbed`` (False, True).
        self._layer_flops = (
            model.layers * attention_flops_per_pair(model, absorbed=False),
            model.layers * attention_flops_per_pair(model, absorbed=True),
        )
        self._compute_rate = chip.compute_efficiency * chip.peak_flops * shape.stage_chips
        self._kv_per_token = kv_bytes_per_token_per_chip(model, shape)
        self._memory_rate = chip.memory_efficiency * chip.hbm_bytes_per_s
        # The weights a chip streams (``forward``): dense per chip, and one routed expert's share.
        routed = model.routed_expert_params
        dense = model.total_params_b * 1e9 - routed
        self._dense_per_chip = dense / (shape.tp * shape.pp)
        self._per_expert = routed / model.moe_experts if model.is_moe else 0.0
        self._expert_chips = shape.stage_chips * shape.pp
        # ``footprint.touched_experts``: E (1 - (1 - k/E)^tokens); E = 0 for a dense model.
        self._experts = model.moe_experts if model.is_moe else 0
        self._miss_per_token = (1.0 - model.moe_top_k / model.moe_experts) if model.is_moe else 1.0
        self.allreduce = AllReduce(chip, shape.tp)
        self._links = stage_links(chip, shape) if pp > 1 else None
        self.overhead_s = self._stage_layers * LAUNCH_OVERHEAD_PER_LAYER_S

    def prefill(self, new_tokens: int, cached_tokens: int, batch: int = 1) -> Timing:
        """``perf.prefill_time`` on the roofline (``new_tokens`` > 0; the caller checks)."""
        # Sum over the batch of L_new (L_c + L_new/2): the query-key pairs of causal attention.
        attention_pairs = batch * new_tokens * (cached_tokens + new_tokens / 2)
        return self.forward(
            tokens=batch * new_tokens,
            attention_pairs=attention_pairs,
            kv_tokens=batch * (cached_tokens + new_tokens),
            prefill=True,
            absorbed=new_tokens == 1,
        )

    def forward(
        self,
        *,
        tokens: float,
        attention_pairs: float,
        kv_tokens: float,
        prefill: bool,
        absorbed: bool,
    ) -> Timing:
        """The shared roofline of every pass (see ``perf``'s module docstring)."""
        model, chip, shape = self.model, self.chip, self.shape
        pp = shape.pp
        if pp == 1:
            micro = 1
        elif prefill:
            micro = max(1, math.ceil(tokens / PP_CHUNK_TOKENS))
        else:
            micro = max(1, min(math.ceil(tokens), pp))
        mb_tokens = tokens / micro
        rank_tokens = mb_tokens / shape.dp
        stage_layers = self._stage_layers
        # 2 FLOPs per parameter per token for the matmuls, plus attention per query-key pair.
        flops = (
            self._matmul_flops * mb_tokens + self._layer_flops[absorbed] * attention_pairs / micro
        ) / pp
        compute_s = flops / self._compute_rate
        kv_per_chip = kv_tokens / micro / shape.dp * self._kv_per_token
        elementwise = (
            rank_tokens * model.hidden_size * ACTIVATION_BYTES * ELEMENTWISE_VECTORS_PER_LAYER
        ) * stage_layers
        bytes_per_chip = self._weight_bytes(mb_tokens) + kv_per_chip + elementwise
        memory_s = bytes_per_chip / self._memory_rate
        # ``max(compute_s, memory_s)``, once (a comparison with ``max``'s result).
        peak_s = memory_s if memory_s > compute_s else compute_s
        comm_s = 0.0
        if shape.tp > 1:
            message = rank_tokens * model.hidden_size * ACTIVATION_BYTES
            comm_s += stage_layers * 2 * self.allreduce.seconds(message)
        hidden_s = 0.0
        if shape.ep > 1:
            a2a = stage_layers * 2 * alltoall_time(model, chip, shape, mb_tokens)
            visible = max(0.0, a2a - peak_s)
            comm_s += visible
            hidden_s = a2a - visible
        overhead_s = self.overhead_s
        stage_s = peak_s + comm_s + overhead_s
        periods, handoff_s, fill_s, slowest_s = 1, 0.0, 0.0, 0.0
        if self._links is not None:
            periods, handoff_s, fill_s, slowest_s = self._through_stages(
                self._links, mb_tokens, micro, stage_s, prefill=prefill
            )
        bound: Bound = "compute"
        if memory_s > compute_s:
            bound = "memory"
        if comm_s + slowest_s > peak_s:
            bound = "comm"
        # The fields in ``Timing``'s order (``tuples.new_tuple``).
        return new_tuple(
            Timing,
            (
                periods * stage_s + handoff_s,
                periods * compute_s,
                periods * memory_s,
                periods * comm_s + handoff_s,
                periods * overhead_s,
                bound,
                periods * hidden_s,
                fill_s,
            ),
        )

    def _weight_bytes(self, mb_tokens: float) -> float:
        """Weight bytes one chip streams for a micro-batch of ``mb_tokens`` in its stage:
        dense/attention weights shard over ``tp x pp``; routed experts over the stage's
        ``tp x dp`` chips and ``pp``, and only the experts the micro-batch touches are read
        (``footprint.touched_experts``). For ``tp = pp = dp = 1``: ``active_weight_bytes``."""
        touched = 0.0
        if self._experts:
            touched = self._experts * (1.0 - self._miss_per_token ** max(mb_tokens, 1.0))
        weights = self._dense_per_chip + self._per_expert * touched / self._expert_chips
        return weights * self.model.weight_bytes_per_param

    def _through_stages(
        self, links: StageLinks, mb_tokens: float, micro: int, stage_s: float, *, prefill: bool
    ) -> tuple[int, float, float, float]:
        """``pipeline``: the periods and hand-offs of a pass through ``pp`` stages of
        ``stage_s`` each, its fill time, and the slowest stage's hand-off."""
        pp = self.shape.pp
        total_s, slowest_s = links.handoff_s(mb_tokens, self.model.hidden_size)
        if prefill:
            periods, handoff_s, fill_s = prefill_pass(micro, pp, stage_s, total_s, slowest_s)
        else:
            periods, handoff_s, fill_s = decode_pass(pp, slowest_s)
        return periods, handoff_s, fill_s, slowest_s


# Rooflines by the identity of their specs: hashing the frozen specs costs more than a pass.
# An entry holds its specs, so their ids cannot be reused while it lives.
_ROOFLINES: dict[tuple[int, int, int], Roofline] = {}
_ROOFLINES_LIMIT = 1024


def roofline(model: ModelSpec, chip: ChipSpec, shape: InstanceShape) -> Roofline:
    """The ``Roofline`` of ``model`` on ``chip`` with ``shape`` (built once, then shared)."""
    key = (id(model), id(chip), id(shape))
    found = _ROOFLINES.get(key)
    if found is None:
        if len(_ROOFLINES) >= _ROOFLINES_LIMIT:
            _ROOFLINES.clear()
        found = _ROOFLINES[key] = Roofline(model, chip, shape)
    return found
