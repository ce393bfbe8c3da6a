"""Where things run: sites, the links between and inside them, pools, and the topology.

Split from ``specs.core`` (chips, models, SLAs, prices): these describe a deployment rather than
the hardware or the contract. They validate on construction like every spec (``SpecError``
naming the field); ``Topology.check_shapes`` applies the instance-shape rules of
``specs.shape``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pdd_core.specs.core import (
    ChipSpec,
    LinkKind,
    ModelSpec,
    RldMode,
    Role,
    SpecError,
    require_identifier,
    require_non_negative,
    require_positive,
)
from pdd_core.specs.shape import InstanceShape, ShapeError, check_shape, pool_cost_per_hour


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
        require_identifier(self.id)
        if not isinstance(self.kind, LinkKind):
            try:
                object.__setattr__(self, "kind", LinkKind(self.kind))
            except ValueError:
                raise SpecError("kind", f"must be rdma or wan, got {self.kind!r}") from None
        require_positive(self, "bandwidth_gbps")
        require_non_negative(self, "rtt_ms", "jitter_ms", "bandwidth_jitter", "cost_per_gb")
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

    ``chunk_tokens`` is the engine's token budget per iteration (chunked prefill: vLLM's
    ``max_num_batched_tokens``, SGLang's ``chunked_prefill_size``): part of the design, since it
    trades a colocated instance's TPOT against its prefill throughput. None means the run's
    ``SimConfig.prefill_chunk_tokens``.
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
    chunk_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):
            try:
                object.__setattr__(self, "role", Role(self.role))
            except ValueError:
                raise SpecError("role", f"must be P, RLD or MD, got {self.role!r}") from None
        require_positive(self, "tp", "pp", "dp", "ep")
        require_non_negative(self, "instances")
        chunk = self.chunk_tokens
        bad = isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1
        if chunk is not None and bad:
            raise SpecError("chunk_tokens", f"must be a positive integer, got {chunk!r}")

    @property
    def shape(self) -> InstanceShape:
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
        require_identifier(self.id)


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
        return sum(pool_cost_per_hour(self.chips[p.chip], p.shape, p.instances) for p in self.pools)
