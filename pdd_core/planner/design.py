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
from pdd_core.specs import ChipSpec, PoolSpec, Role

PDD = "pdd"
SAME_DC = "same-dc"


@dataclass(frozen=True, slots=True)
class PoolChoice:
    """``instances`` instances of ``tp`` chips of ``chip`` in ``site`` playing ``role``."""

    site: str
    chip: str
    role: Role
    instances: int
    tp: int

    @property
    def chips(self) -> int:
        return self.instances * self.tp

    def cost(self, chips: Mapping[str, ChipSpec]) -> float:
        return self.chips * chips[self.chip].price_per_hour

    def spec(self, model: str) -> PoolSpec:
        return PoolSpec(self.site, self.chip, model, self.role, self.instances, self.tp)

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "chip": self.chip,
            "role": str(self.role),
            "instances": self.instances,
            "tp": self.tp,
        }


@dataclass(frozen=True, slots=True)
class Design:
    """A PDD deployment (P and RLD in one site, MD in another) or a same-dc one (P and D).

    For ``same-dc`` the decode pool has role MD (the simulator's D) and ``relay`` is None.
    """

    policy: str
    prefill: PoolChoice
    decode: PoolChoice
    relay: PoolChoice | None
    table: RoutingTable

    @property
    def pools(self) -> tuple[PoolChoice, ...]:
        pools = [self.prefill]
        if self.relay is not None:
            pools.append(self.relay)
        pools.append(self.decode)
        return tuple(pools)

    def cost(self, chips: Mapping[str, ChipSpec]) -> float:
        return sum(p.cost(chips) for p in self.pools)

    def with_instances(self, role: Role, instances: int) -> Design:
        if role is Role.PREFILL:
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
        return " + ".join(f"{p.role} {p.instances}x{p.chip}@tp{p.tp}/{p.site}" for p in self.pools)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
            "relay": self.relay.to_dict() if self.relay is not None else None,
            "table": asdict(self.table),
        }


def _pool(raw: Mapping[str, Any]) -> PoolChoice:
    return PoolChoice(
        site=str(raw["site"]),
        chip=str(raw["chip"]),
        role=Role(raw["role"]),
        instances=int(raw["instances"]),
        tp=int(raw["tp"]),
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
    )
