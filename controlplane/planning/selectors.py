"""Reads of the planning app: plans, workloads, scenario fixtures, the active configuration."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from controlplane.planning.models import Plan, Sweep, WorkloadProfile
from controlplane.telemetry.integrations import ActivePlan
from pdd_core.scenario import engine_config

SCENARIO_DIR = Path(__file__).resolve().parent.parent.parent / "fixtures" / "scenarios"


def scenario_names() -> list[str]:
    """Scenario fixture files a plan may be computed for (``fixtures/scenarios/*.toml``)."""
    return sorted(p.name for p in SCENARIO_DIR.glob("*.toml"))


def plan_list() -> QuerySet[Plan]:
    return Plan.objects.select_related("workload").order_by("-id")


def workload_list() -> QuerySet[WorkloadProfile]:
    # The trace text can be megabytes; lists never need it.
    return WorkloadProfile.objects.defer("trace").order_by("-id")


def sweep_list() -> QuerySet[Sweep]:
    return Sweep.objects.order_by("-id")


def active_plan() -> Plan | None:
    return Plan.objects.filter(active=True).first()


def active_plan_summary() -> ActivePlan | None:
    """The active plan as telemetry's dashboard and BCR need it (see ``apps.ready``)."""
    plan = active_plan()
    if plan is None:
        return None
    result = plan.result if isinstance(plan.result, dict) else {}
    predicted = result.get("predicted") or {}
    bcr = predicted.get("bcr")
    pools = tuple(result.get("pools") or ())
    return ActivePlan(
        version=plan.version or 0,
        model=str(result.get("model") or ""),
        predicted=dict(predicted),
        predicted_bcr=float(bcr) if isinstance(bcr, int | float) else None,
        pools=pools or None,
    )


def active_config() -> dict[str, Any] | None:
    """What agents must run: the active plan's version, routing table and pools.

    Plain JSON types only (the activation time as ISO text), because the agents' config push
    (``controlplane.agents.config``) sends this dict as it is.
    """
    plan = active_plan()
    if plan is None or not plan.result:
        return None
    result = plan.result
    return {
        "version": plan.version,
        "plan": plan.pk,
        "activated_at": plan.activated_at.isoformat() if plan.activated_at else None,
        "model": result.get("model"),
        "routing_table": result.get("routing_table"),
        "pools": [
            {
                **{k: pool[k] for k in ("site", "chip", "role", "instances", "tp")},
                # The whole instance shape (plans before pipeline/expert parallelism have tp only).
                **{k: int(pool.get(k, 1)) for k in ("pp", "dp", "ep")},
            }
            for pool in result.get("pools", [])
        ],
    }


@lru_cache(maxsize=64)
def _engine_of(scenario_toml: str) -> tuple[int, int]:
    config = engine_config(tomllib.loads(scenario_toml))
    return config.prefill_chunk_tokens, config.max_batch


def plan_engine(plan: Plan, pool: dict[str, Any]) -> dict[str, Any]:
    """The engine settings ``plan`` assumed for one of its pools: its token budget per iteration
    (the pool's own ``chunk_tokens``, else the scenario's ``prefill_chunk_tokens``) and the most
    sequences an instance runs at once (the scenario's ``max_batch``)."""
    text = plan.inputs.get("scenario_toml") if isinstance(plan.inputs, dict) else None
    if not isinstance(text, str):
        return {"chunk_tokens": pool.get("chunk_tokens")} if pool.get("chunk_tokens") else {}
    chunk, max_batch = _engine_of(text)
    return {"chunk_tokens": int(pool.get("chunk_tokens") or chunk), "max_batch": max_batch}
