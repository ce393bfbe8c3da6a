"""Specifications of the things PDD serves with: chips, models, links, sites, SLAs and prices.

Every number the product computes starts from one of these frozen dataclasses. They validate
on construction (a bad value raises ``ValueError`` naming the field), carry no behaviour beyond
cheap derived quantities, and load from the plain catalog files in ``fixtures/catalog/`` that
the control plane seeds its database from, so both halves read the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pdd_core.specs.shape import InstanceShape

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


class SpecError(ValueError):
    """A specification value is invalid; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SpecError(name, f"must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise SpecError(name, f"must be a positive finite number, got {value!r}")


def _non_negative(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SpecError(name, f"must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise SpecError(name, f"must be a non-negative finite number, got {value!r}")


def _fraction(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int | float) or not 0 < value <= 1:
            raise SpecError(name, f"must be in (0, 1], got {value!r}")


def _identifier(value: str, name: str = "id") -> None:
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
        _identifier(self.id)
        for name in ("scaleup_domain", "chips_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(name, f"must be a positive integer, got {value!r}")
        _positive(
            self,
            "bf16_tflops",
            "hbm_gib",
            "hbm_tbps",
            "scaleup_gbytes_per_s",
            "scaleout_gbits_per_s",
        )
        _non_negative(self, "price_per_hour")
        _fraction(self, "compute_efficiency", "memory_efficiency")
        if self.fp8_tflops is not None:
            _positive(self, "fp8_tflops")

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
        _identifier(self.id)
        if not isinstance(self.attention, Attention):
            try:
                object.__setattr__(self, "attention", Attention(self.attention))
            except ValueError:
                raise SpecError(
                    "attention", f"must be one of mha, gqa, mla, got {self.attention!r}"
                ) from None
        _positive(
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
        _non_negative(self, "kv_lora_rank", "rope_dim", "moe_experts", "moe_top_k")
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
class LinkSpec:
    """A network path: RDMA inside a site or a WAN line between two sites.

    ``jitter_ms`` is the standard deviation of the extra one-way delay a transfer sees;
    ``bandwidth_jitter`` the coefficient of variation of the bandwidth a transfer gets.
    """

    id: str
    kind: LinkKind
    source_site: str
    target_site: str
    bandwidth_gbps: float
    rtt_ms: float
    jitter_ms: float = 0.0
    bandwidth_jitter: float = 0.0
    cost_per_gb: float = 0.0

    def __post_init__(self) -> None:
        _identifier(self.id)
        if not isinstance(self.kind, LinkKind):
            try:
                object.__setattr__(self, "kind", LinkKind(self.kind))
            except ValueError:
                raise SpecError("kind", f"must be rdma or wan, got {self.kind!r}") from None
        _positive(self, "bandwidth_gbps")
        _non_negative(self, "rtt_ms", "jitter_ms", "bandwidth_jitter", "cost_per_gb")
        if self.bandwidth_jitter >= 1:
            raise SpecError("bandwidth_jitter", "must be below 1")
        if self.kind is LinkKind.WAN and self.source_site == self.target_site:
            raise SpecError("target_site", "a WAN link joins two different sites")
        if self.kind is LinkKind.RDMA and self.source_site != self.target_site:
            raise SpecError("target_site", "an RDMA link is a site's internal fabric")

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbps * 1e9 / 8


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A group of identical instances of one role, on one chip type, in one site.

    Each instance is ``tp x pp x dp`` chips (``specs.shape.InstanceShape``; ``ep`` is 1 or
    ``tp x dp``); a drained pool has 0 instances. A ``Topology`` that knows the chip and model
    validates the shape with ``specs.shape.check_shape``.
    """

    site: str
    chip: str
    model: str
    role: Role
    instances: int
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):
            try:
                object.__setattr__(self, "role", Role(self.role))
            except ValueError:
                raise SpecError("role", f"must be P, RLD or MD, got {self.role!r}") from None
        _positive(self, "tp", "pp", "dp", "ep")
        _non_negative(self, "instances")

    @property
    def shape(self) -> InstanceShape:
        from pdd_core.specs.shape import InstanceShape

        return InstanceShape(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep)

    @property
    def chips_per_instance(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True, slots=True)
class SiteSpec:
    """A datacenter ("site") and the region it sits in."""

    id: str
    name: str = ""
    region: str = ""

    def __post_init__(self) -> None:
        _identifier(self.id)


@dataclass(frozen=True, slots=True)
class SLA:
    """Service-level targets: TTFT at P90/P99 and TPOT at P90/P99, in seconds."""

    ttft_p90_s: float = 2.0
    ttft_p99_s: float = 5.0
    tpot_p90_s: float = 0.05
    tpot_p99_s: float = 0.1

    def __post_init__(self) -> None:
        _positive(self, "ttft_p90_s", "ttft_p99_s", "tpot_p90_s", "tpot_p99_s")
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
        _non_negative(self, "miss_input_per_mtok", "hit_input_per_mtok", "output_per_mtok")
        if self.hit_input_per_mtok > self.miss_input_per_mtok:
            raise SpecError("hit_input_per_mtok", "cannot exceed miss_input_per_mtok")

    def revenue(self, miss_tokens: float, hit_tokens: float, output_tokens: float) -> float:
        """Revenue of one request (or a sum of requests) in the book's currency."""
        return (
            miss_tokens * self.miss_input_per_mtok
            + hit_tokens * self.hit_input_per_mtok
            + output_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True, slots=True)
class Topology:
    """Sites, the links between and inside them, and the pools that run where.

    ``rld_mode`` says whether PDD's relay decode is its own pool or slots on the P instances
    (``RldMode``); in the shared mode the topology has no RLD pool.
    """

    sites: tuple[SiteSpec, ...]
    links: tuple[LinkSpec, ...] = ()
    pools: tuple[PoolSpec, ...] = ()
    chips: Mapping[str, ChipSpec] = field(default_factory=dict)
    models: Mapping[str, ModelSpec] = field(default_factory=dict)
    rld_mode: RldMode = RldMode.POOL

    def __post_init__(self) -> None:
        if not isinstance(self.rld_mode, RldMode):
            try:
                object.__setattr__(self, "rld_mode", RldMode(self.rld_mode))
            except ValueError:
                raise SpecError(
                    "rld_mode", f"must be pool or shared-with-prefill, got {self.rld_mode!r}"
                ) from None
        site_ids = [s.id for s in self.sites]
        if len(set(site_ids)) != len(site_ids):
            raise SpecError("sites", "site ids must be unique")
        known = set(site_ids)
        for link in self.links:
            for end in (link.source_site, link.target_site):
                if end not in known:
                    raise SpecError("links", f"link {link.id} names unknown site {end!r}")
        for pool in self.pools:
            if pool.site not in known:
                raise SpecError("pools", f"pool names unknown site {pool.site!r}")
            if self.chips and pool.chip not in self.chips:
                raise SpecError("pools", f"pool names unknown chip {pool.chip!r}")
            if self.models and pool.model not in self.models:
                raise SpecError("pools", f"pool names unknown model {pool.model!r}")

    def check_shapes(self) -> None:
        """Raise ``ShapeError`` (naming the pool and the rule) for the first invalid pool shape.

        Scenario files and the planner call it: every shape they use must obey
        ``specs.shape.check_shape``. Construction does not, so a test may build an engine on
        any chip count.
        """
        from pdd_core.specs.shape import ShapeError, check_shape

        for pool in self.pools:
            try:
                check_shape(self.models[pool.model], self.chips[pool.chip], pool.shape)
            except ShapeError as exc:
                raise ShapeError(
                    exc.rule, f"pool {pool.site}/{pool.role}/{pool.chip}: {exc.detail}"
                ) from None

    def pools_of(self, role: Role, site: str | None = None) -> tuple[PoolSpec, ...]:
        return tuple(p for p in self.pools if p.role is role and (site is None or p.site == site))

    def link_between(self, a: str, b: str) -> LinkSpec | None:
        for link in self.links:
            if {link.source_site, link.target_site} == {a, b}:
                return link
        return None

    def cost_per_hour(self) -> float:
        """Hardware cost rate: per pool, whole nodes x chips per node x price per chip-hour."""
        from pdd_core.specs.shape import pool_cost_per_hour

        return sum(pool_cost_per_hour(self.chips[p.chip], p.shape, p.instances) for p in self.pools)
