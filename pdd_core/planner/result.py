"""What the planner returns: a ``Plan`` (pools, routing, predictions, baseline, bathtub, reasons)
or an ``Infeasible`` explanation. Both are plain frozen data with a JSON-ready ``to_dict``, the
shape ``pdd plan --json`` prints and the control plane stores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pdd_core.planner.bathtub import Bathtub
from pdd_core.planner.design import Design, PoolChoice
from pdd_core.routing import RoutingTable
from pdd_core.sim import Summary
from pdd_core.specs import ChipSpec, RldMode, Role

PREDICTED_KEYS: tuple[str, ...] = (
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "tpot_p50",
    "tpot_p90",
    "tpot_p99",
    "goodput_rps",
    "throughput_rps",
    "cost_per_hour",
    "bcr",
    "revenue_per_hour",
    "bcr_revenue",
    "sla_met",
    "requests",
    "rejected",
    "wan_gbps_mean",
    "wan_gbps_peak",
    "handoff_kv_share",
    "rld_token_share",
    "hit_request_weighted",
    "hit_token_weighted",
    "utilisation",
    "pipeline_mix",
    "handoff_mix",
)


def clean(value: Any) -> Any:
    """NaN and infinities become None so the JSON is strict."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def predicted_from(summary: Summary) -> dict[str, Any]:
    """The simulator's figures a plan reports (``source`` says where they come from)."""
    row = summary.to_dict()
    out = {key: row[key] for key in PREDICTED_KEYS}
    out["source"] = "simulator"
    return out


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """One pool of the plan with its cost and the sentence that explains its size
    (``chunk_tokens``: the engine's token budget per iteration, ``PoolChoice``'s)."""

    site: str
    chip: str
    role: str
    instances: int
    tp: int
    cost_per_hour: float
    reason: str
    pp: int = 1
    dp: int = 1
    ep: int = 1
    chunk_tokens: int | None = None

    @property
    def chips(self) -> int:
        return self.instances * self.tp * self.pp * self.dp

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["chips"] = self.chips
        return row


@dataclass(frozen=True, slots=True)
class Plan:
    """A verified plan (see the package docstring for each part)."""

    name: str
    model: str
    pools: tuple[PoolPlan, ...]
    routing_table: RoutingTable
    predicted: dict[str, Any]
    analytic: dict[str, Any]
    baseline: dict[str, Any]
    cost_table: tuple[dict[str, Any], ...]
    bathtub: Bathtub
    reasons: dict[str, Any]
    search: dict[str, Any]
    policy: str = "pdd"
    rld_mode: str | None = None

    @property
    def feasible(self) -> bool:
        return True

    def design(self) -> Design:
        """The recommended design as the search held it (pools, routing table, RLD mode)."""
        chosen = {p.role: _choice(p) for p in self.pools}
        prefill = chosen[str(Role.PREFILL)]
        decode = chosen.get(
            str(Role.MAIN_DECODE), replace(prefill, role=Role.MAIN_DECODE, instances=0)
        )
        return Design(
            policy=self.policy,
            prefill=prefill,
            decode=decode,
            relay=chosen.get(str(Role.RELAY_DECODE)),
            table=self.routing_table,
            rld_mode=RldMode(self.rld_mode) if self.rld_mode else RldMode.POOL,
        )

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = clean(
            {
                "feasible": True,
                "name": self.name,
                "model": self.model,
                "policy": self.policy,
                "rld_mode": self.rld_mode,
                "pools": [p.to_dict() for p in self.pools],
                "routing_table": asdict(self.routing_table),
                "predicted": self.predicted,
                "analytic": self.analytic,
                "baseline": {**self.baseline, "cost_table": list(self.cost_table)},
                "bathtub": self.bathtub.to_dict(),
                "reasons": self.reasons,
                "search": self.search,
            }
        )
        return result


@dataclass(frozen=True, slots=True)
class Infeasible:
    """No plan: what cannot be met, and what would fix it."""

    name: str
    model: str
    problems: tuple[str, ...]
    fixes: tuple[str, ...]
    search: dict[str, Any]

    @property
    def feasible(self) -> bool:
        return False

    @property
    def explanation(self) -> str:
        return " ".join(self.problems) + (" Fix: " + "; ".join(self.fixes) if self.fixes else "")

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = clean(
            {
                "feasible": False,
                "name": self.name,
                "model": self.model,
                "explanation": self.explanation,
                "problems": list(self.problems),
                "fixes": list(self.fixes),
                "pools": [],
                "routing_table": None,
                "predicted": None,
                "baseline": None,
                "bathtub": None,
                "reasons": {"binding": None, "infeasible": list(self.problems)},
                "search": self.search,
            }
        )
        return result


PlanOutcome = Plan | Infeasible


def cost_table(
    plan: Design, base: Design | None, chips: Mapping[str, ChipSpec]
) -> list[dict[str, object]]:
    """Side by side per role: the plan's pool and cost, the baseline's (its D under MD)."""
    rows: list[dict[str, object]] = []
    for role in (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE):
        mine = plan.pool(role)
        theirs = base.pool(role) if base is not None else None
        rows.append(
            {
                "role": "MD / D" if role is Role.MAIN_DECODE else str(role),
                "plan": pool_text(mine),
                "plan_cost_per_hour": mine.cost(chips) if mine else 0.0,
                "baseline": pool_text(theirs),
                "baseline_cost_per_hour": theirs.cost(chips) if theirs else 0.0,
            }
        )
    rows.append(
        {
            "role": "total",
            "plan": f"{sum(p.chips for p in plan.pools)} chips",
            "plan_cost_per_hour": plan.cost(chips),
            "baseline": f"{sum(p.chips for p in base.pools)} chips" if base else "-",
            "baseline_cost_per_hour": base.cost(chips) if base else None,
        }
    )
    return rows


def _choice(pool: PoolPlan) -> PoolChoice:
    return PoolChoice(
        pool.site, pool.chip, Role(pool.role), pool.instances, pool.tp, pool.pp, pool.dp,
        pool.ep, pool.chunk_tokens,
    )  # fmt: skip


def pool_text(pool: PoolChoice | None) -> str:
    if pool is None:
        return "-"
    return f"{pool.instances} x {pool.chip} {pool.shape.label()} ({pool.chips} chips, {pool.site})"
