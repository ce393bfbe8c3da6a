"""Specifications of the things PDD serves with: chips, models, SLAs and prices.

Every number the product computes starts from one of these frozen dataclasses. They validate
on construction (a bad value raises ``ValueError`` naming the field), carry no behaviour beyond
cheap derived quantities, and load from the plain catalog files in ``fixtures/catalog/`` that
the control plane seeds its database from, so both halves read the same figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from pdd_core.errors import PddError

GIB = 1024**3


class Attention(StrEnum):
    """Attention kind, which decides how many bytes of KV a token holds."""

    MHA = "mha"
    GQA = "gqa"
    MLA = "mla"


class Role(StrEnum):
    """The three PDD roles of DOMAIN.md section 4."""

    PREFILL = "P"
    RELAY_DECODE = "RLD"
    MAIN_DECODE = "MD"


class RldMode(StrEnum):
    """Where PDD's relay decode runs (DOMAIN.md section 4: RLD is a thin slice in cluster A).

    ``pool``: its own instances beside P. ``shared-with-prefill``: decode slots on the prefill
    instances themselves (same weights, no extra replica), time-shared with prefill chunks the
    way a chunked-prefill engine mixes decode steps into its batches.
    """

    POOL = "pool"
    SHARED = "shared-with-prefill"


class LinkKind(StrEnum):
    """RDMA inside a site, Ethernet/TCP between sites."""

    RDMA = "rdma"
    WAN = "wan"


class SpecError(PddError, ValueError):
    """A specification value is invalid; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def require_positive(obj: object, *names: str) -> None:
    """Raise ``SpecError`` unless each named attribute of ``obj`` is a positive finite number."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SpecError(name, f"must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise SpecError(name, f"must be a positive finite number, got {value!r}")


def require_non_negative(obj: object, *names: str) -> None:
    """Raise ``SpecError`` unless each named attribute is a non-negative finite number."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SpecError(name, f"must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise SpecError(name, f"must be a non-negative finite number, got {value!r}")


def require_fraction(obj: object, *names: str) -> None:
    """Raise ``SpecError`` unless each named attribute lies in (0, 1]."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int | float) or not 0 < value <= 1:
            raise SpecError(name, f"must be in (0, 1], got {value!r}")


def require_identifier(value: str, name: str = "id") -> None:
    """Raise ``SpecError`` unless ``value`` is a non-empty string."""
    if not value or not isinstance(value, str):
        raise SpecError(name, "must be a non-empty string")


@dataclass(frozen=True, slots=True)
class ChipSpec:
    """One accelerator, judged on the four axes of DOMAIN.md section 1 plus what it costs.

    Compute and memory efficiencies are the achievable fractions of the peaks (eta_c, eta_m in
    DOMAIN.md section 5); they are per-chip inputs, not tuning knobs. ``scaleup_domain`` is how
    many chips share one scale-up fabric (8 on an HGX board, 72 in a GB200 NVL72 rack, 384 in a
    CloudMatrix384 supernode) and ``chips_per_node`` how many a server holds; ``specs.shape``
    uses both to validate instance shapes and to count whole nodes.
    """

    id: str
    name: str
    bf16_tflops: float
    hbm_gib: float
    hbm_tbps: float
    scaleup_gbytes_per_s: float
    scaleout_gbits_per_s: float
    price_per_hour: float
    compute_efficiency: float = 0.55
    memory_efficiency: float = 0.75
    fp8_tflops: float | None = None
    vendor: str = ""
    source: str = ""
    # Chips joined by the scale-up fabric (NVLink/UB/HCCS): a tensor-parallel group stays inside.
    scaleup_domain: int = 8
    # Chips in one server, the unit a pool pays for.
    chips_per_node: int = 8

    def __post_init__(self) -> None:
        require_identifier(self.id)
        for name in ("scaleup_domain", "chips_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(name, f"must be a positive integer, got {value!r}")
        require_positive(
            self,
            "bf16_tflops",
            "hbm_gib",
            "hbm_tbps",
            "scaleup_gbytes_per_s",
            "scaleout_gbits_per_s",
        )
        require_non_negative(self, "price_per_hour")
        require_fraction(self, "compute_efficiency", "memory_efficiency")
        if self.fp8_tflops is not None:
            require_positive(self, "fp8_tflops")

    @property
    def peak_flops(self) -> float:
        """Dense BF16 FLOP/s."""
        return self.bf16_tflops * 1e12

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gib * GIB

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tbps * 1e12

    @property
    def scaleup_bytes_per_s(self) -> float:
        return self.scaleup_gbytes_per_s * 1e9


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A served model: enough of its published config to derive weights, FLOPs and KV bytes.

    KV bytes per token is derived (DOMAIN.md section 5), never typed in: GQA/MHA hold
    ``2 x layers x kv_heads x head_dim x bytes``; MLA holds ``layers x (kv_lora_rank + rope_dim)
    x bytes`` (one compressed latent plus the decoupled RoPE key, shared by all heads).
    """

    id: str
    name: str
    total_params_b: float
    active_params_b: float
    layers: int
    hidden_size: int
    attention: Attention
    attention_heads: int
    kv_heads: int
    head_dim: int
    kv_lora_rank: int = 0
    rope_dim: int = 0
    kv_bytes_per_elem: float = 2.0
    weight_bytes_per_param: float = 2.0
    moe_experts: int = 0
    moe_top_k: int = 0
    moe_shared_experts: int = 0
    max_context: int = 131072
    source: str = ""
    estimate: bool = False

    def __post_init__(self) -> None:
        require_identifier(self.id)
        if not isinstance(self.attention, Attention):
            try:
                object.__setattr__(self, "attention", Attention(self.attention))
            except ValueError:
                raise SpecError(
                    "attention", f"must be one of mha, gqa, mla, got {self.attention!r}"
                ) from None
        require_positive(
            self,
            "total_params_b",
            "active_params_b",
            "layers",
            "hidden_size",
            "attention_heads",
            "kv_heads",
            "head_dim",
            "kv_bytes_per_elem",
            "weight_bytes_per_param",
            "max_context",
        )
        require_non_negative(self, "kv_lora_rank", "rope_dim", "moe_experts", "moe_top_k")
        if self.active_params_b > self.total_params_b:
            raise SpecError("active_params_b", "cannot exceed total_params_b")
        if self.kv_heads > self.attention_heads:
            raise SpecError("kv_heads", "cannot exceed attention_heads")
        if self.attention is Attention.MLA and self.kv_lora_rank <= 0:
            raise SpecError("kv_lora_rank", "an MLA model needs a positive latent rank")
        if self.attention is Attention.MHA and self.kv_heads != self.attention_heads:
            raise SpecError("kv_heads", "an MHA model has as many kv heads as attention heads")
        if self.is_moe:
            if not 0 < self.moe_top_k <= self.moe_experts:
                raise SpecError("moe_top_k", "must be between 1 and moe_experts")
            if self.active_params_b >= self.total_params_b:
                raise SpecError("active_params_b", "a MoE model activates fewer than all params")
        elif self.moe_top_k:
            raise SpecError("moe_top_k", "a dense model (moe_experts=0) has no top-k")
        # Each figure is finite, but their products can overflow a float.
        if not math.isfinite(self.kv_bytes_per_token):
            raise SpecError("kv_bytes_per_elem", "the KV bytes per token it gives are not finite")
        if not math.isfinite(self.weight_bytes):
            raise SpecError("weight_bytes_per_param", "the weight bytes it gives are not finite")

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    @property
    def kv_bytes_per_token(self) -> float:
        """Bytes of KV cache one token holds across all layers (DOMAIN.md section 5)."""
        if self.attention is Attention.MLA:
            return self.layers * (self.kv_lora_rank + self.rope_dim) * self.kv_bytes_per_elem
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_elem

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights as served."""
        return self.total_params_b * 1e9 * self.weight_bytes_per_param

    @property
    def routed_expert_params(self) -> float:
        """Parameters in routed experts, derived from total and active counts.

        ``total = shared + routed`` and ``active = shared + routed x top_k / experts`` give
        ``routed = (total - active) / (1 - top_k / experts)``; zero for a dense model.
        """
        if not self.is_moe:
            return 0.0
        share = self.moe_top_k / self.moe_experts
        return (self.total_params_b - self.active_params_b) * 1e9 / (1 - share)


@dataclass(frozen=True, slots=True)
class SLA:
    """Service-level targets: TTFT at P90/P99 and TPOT at P90/P99, in seconds."""

    ttft_p90_s: float = 2.0
    ttft_p99_s: float = 5.0
    tpot_p90_s: float = 0.05
    tpot_p99_s: float = 0.1

    def __post_init__(self) -> None:
        require_positive(self, "ttft_p90_s", "ttft_p99_s", "tpot_p90_s", "tpot_p99_s")
        if self.ttft_p99_s < self.ttft_p90_s:
            raise SpecError("ttft_p99_s", "cannot be below ttft_p90_s")
        if self.tpot_p99_s < self.tpot_p90_s:
            raise SpecError("tpot_p99_s", "cannot be below tpot_p90_s")


@dataclass(frozen=True, slots=True)
class PriceBook:
    """What a tenant pays per million tokens; hit input tokens at a fraction of the miss price."""

    miss_input_per_mtok: float
    hit_input_per_mtok: float
    output_per_mtok: float
    currency: str = "USD"

    def __post_init__(self) -> None:
        require_non_negative(self, "miss_input_per_mtok", "hit_input_per_mtok", "output_per_mtok")
        if self.hit_input_per_mtok > self.miss_input_per_mtok:
            raise SpecError("hit_input_per_mtok", "cannot exceed miss_input_per_mtok")

    def revenue(self, miss_tokens: float, hit_tokens: float, output_tokens: float) -> float:
        """Revenue of one request (or a sum of requests) in the book's currency."""
        return (
            miss_tokens * self.miss_input_per_mtok
            + hit_tokens * self.hit_input_per_mtok
            + output_tokens * self.output_per_mtok
        ) / 1e6
