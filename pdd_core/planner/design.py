"""A candidate deployment: which chip, tensor-parallel degree and instance count per role.

The search proposes designs, the analytic model evaluates them, the simulator verifies the best
few, and the plan reports one. A design is plain frozen data so it crosses process boundaries
(Celery fans verifications out as JSON) unchanged: ``to_dict``/``design_from_dict`` round-trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pdd_core.routing import RoutingTable
from pdd_core.specs import ChipSpec, InstanceShape, PoolSpec, RldMode, Role, pool_cost_per_hour

PDD = "pdd"
SAME_DC = "same-dc"
COLOCATED = "colocated"
# A design *family* is what the verdict compares. Three are simulator policies; the fourth,
# heterogeneous same-dc (P and D on different chips of one site), runs as ``same-dc`` too.
HETERO = "same-dc-hetero"
FAMILIES: tuple[str, ...] = (PDD, SAME_DC, HETERO, COLOCATED)
FAMILY_NAMES = {
    PDD: "PDD",
    SAME_DC: "homogeneous disaggregated (same-dc)",
    HETERO: "heterogeneous disaggregated (same-dc, two chips)",
    COLOCATED: "aggregated",
}


@dataclass(frozen=True, slots=True)
class PoolChoice:
    """``instances`` instances of ``shape`` (``tp x pp x dp`` chips) of ``chip`` in ``site``.

    Cost counts whole nodes (``specs.pool_cost_per_hour``), so a plan is something an operator
    can rack. ``chunk_tokens`` is the instances' token budget per iteration (``PoolSpec``'s;
    None: the run's ``SimConfig.prefill_chunk_tokens``), searched like the shape.
    """

    site: str
    chip: str
    role: Role
    instances: int
    tp: int
    pp: int = 1
    dp: int = 1
    ep: int = 1
    chunk_tokens: int | None = None

    @property
    def shape(self) -> InstanceShape:
        return InstanceShape(tp=self.tp, pp=self.pp, dp=self.dp, ep=self.ep)

    @property
    def chips(self) -> int:
        return self.instances * self.shape.chips

    def cost(self, chips: Mapping[str, ChipSpec]) -> float:
        return pool_cost_per_hour(chips[self.chip], self.shape, self.instances)

    def spec(self, model: str) -> PoolSpec:
        return PoolSpec(
            self.site,
            self.chip,
            model,
            self.role,
            self.instances,
            self.tp,
            self.pp,
            self.dp,
            self.ep,
            self.chunk_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "chip": self.chip,
            "role": str(self.role),
            "instances": self.instances,
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": self.ep,
            "chunk_tokens": self.chunk_tokens,
        }


@dataclass(frozen=True, slots=True)
class Design:
    """A PDD deployment (P and RLD in one site, MD in another), a homogeneous disaggregated one
    (``same-dc``: P and D in one site) or an aggregated one (``colocated``: every instance does
    both phases with chunked prefill).

    For ``same-dc`` the decode pool has role MD (the simulator's D) and ``relay`` is None. For
    ``colocated`` the ``prefill`` pool is the mixed pool and ``decode`` mirrors its chip and shape
    with 0 instances. A PDD design with ``rld_mode`` shared has no relay pool: the P instances
    run the relay slots.
    """

    policy: str
    prefill: PoolChoice
    decode: PoolChoice
    relay: PoolChoice | None
    table: RoutingTable
    rld_mode: RldMode = RldMode.POOL

    @property
    def family(self) -> str:
        """The verdict's family: the policy, with same-dc split by one chip or two."""
        if self.policy == SAME_DC and self.prefill.chip != self.decode.chip:
            return HETERO
        return self.policy

    @property
    def pools(self) -> tuple[PoolChoice, ...]:
        pools = [self.prefill]
        if self.relay is not None:
            pools.append(self.relay)
        if self.decode.instances > 0 or self.policy != COLOCATED:
            pools.append(self.decode)
        return tuple(pools)

    def cost(self, chips: Mapping[str, ChipSpec]) -> float:
        return sum(p.cost(chips) for p in self.pools)

    def with_instances(self, role: Role, instances: int) -> Design:
        if role is Role.PREFILL or self.policy == COLOCATED:
            return replace(self, prefill=replace(self.prefill, instances=instances))
        if role is Role.RELAY_DECODE and self.relay is not None:
            return replace(self, relay=replace(self.relay, instances=instances))
        return replace(self, decode=replace(self.decode, instances=instances))

    def pool(self, role: Role) -> PoolChoice | None:
        if role is Role.PREFILL:
            return self.prefill
        if role is Role.RELAY_DECODE:
            return self.relay
        return self.decode

    def label(self) -> str:
        if self.policy == PDD and self.rld_mode is RldMode.SHARED:
            pools = " + ".join(
                f"{p.role} {p.instances}x{p.chip}@{p.shape.label()}/{p.site}" for p in self.pools
            )
            return f"{pools} (RLD shared with P)"
        if self.policy == COLOCATED:
            p = self.prefill
            chunk = f" chunk {p.chunk_tokens}" if p.chunk_tokens else ""
            return f"colocated {p.instances}x{p.chip}@{p.shape.label()}/{p.site}{chunk}"
        return " + ".join(
            f"{p.role} {p.instances}x{p.chip}@{p.shape.label()}/{p.site}" for p in self.pools
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
            "relay": self.relay.to_dict() if self.relay is not None else None,
            "table": asdict(self.table),
            "rld_mode": str(self.rld_mode),
        }


def _pool(raw: Mapping[str, Any]) -> PoolChoice:
    return PoolChoice(
        site=str(raw["site"]),
        chip=str(raw["chip"]),
        role=Role(raw["role"]),
        instances=int(raw["instances"]),
        tp=int(raw["tp"]),
        pp=int(raw.get("pp", 1)),
        dp=int(raw.get("dp", 1)),
        ep=int(raw.get("ep", 1)),
        chunk_tokens=None if raw.get("chunk_tokens") is None else int(raw["chunk_tokens"]),
    )


def design_from_dict(raw: Mapping[str, Any]) -> Design:
    """Inverse of ``Design.to_dict``."""
    relay = raw.get("relay")
    return Design(
        policy=str(raw["policy"]),
        prefill=_pool(raw["prefill"]),
        decode=_pool(raw["decode"]),
        relay=_pool(relay) if relay else None,
        table=RoutingTable(**raw["table"]),
        rld_mode=RldMode(raw.get("rld_mode", RldMode.POOL)),
    )
