"""The planner end to end: limits, infeasibility, determinism, and the reference scenario."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pdd_core.planner import CandidateChip, Infeasible, Plan, PlannerInputs, make_plan
from pdd_core.specs import SLA, Role


def _chips_used(plan: Plan) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = {}
    for pool in plan.pools:
        used[(pool.site, pool.chip)] = used.get((pool.site, pool.chip), 0) + pool.chips
    return used


def test_small_plan_has_every_part(small_plan: Any) -> None:
    assert isinstance(small_plan, Plan)
    data = small_plan.to_dict()
    assert {"pools", "routing_table", "predicted", "baseline", "bathtub", "reasons"} <= set(data)
    assert [p["role"] for p in data["pools"]] == ["P", "RLD", "MD"]
    assert data["predicted"]["source"] == "simulator"
    assert data["predicted"]["sla_met"] is True
    assert data["baseline"]["predicted"]["sla_met"] is True
    assert [r["role"] for r in data["baseline"]["cost_table"]] == ["P", "RLD", "MD / D", "total"]
    assert len(data["reasons"]["pools"]) == 3
    assert data["reasons"]["binding"] in {
        "prefill compute", "decode KV capacity", "decode TPOT", "WAN bandwidth",
        "RLD capacity", "TTFT tail",
    }  # fmt: skip
    json.dumps(data, allow_nan=False)  # strict JSON


def test_plan_respects_chip_limits(small_inputs: PlannerInputs) -> None:
    tight = (
        CandidateChip("dc-a", "h800", 48, (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE)),
        CandidateChip("dc-b", "h20", 16, (Role.MAIN_DECODE,)),
    )
    plan = make_plan(replace(small_inputs, candidates=tight))
    assert isinstance(plan, Plan)
    used = _chips_used(plan)
    assert used[("dc-a", "h800")] <= 48
    assert used[("dc-b", "h20")] <= 16
    for pool in plan.to_dict()["baseline"]["pools"]:
        assert pool["instances"] * pool["tp"] <= 48


def test_too_few_chips_is_infeasible_and_says_so(small_inputs: PlannerInputs) -> None:
    starved = (
        CandidateChip("dc-a", "h800", 16, (Role.PREFILL, Role.RELAY_DECODE)),
        CandidateChip("dc-b", "h20", 16, (Role.MAIN_DECODE,)),
    )
    outcome = make_plan(replace(small_inputs, candidates=starved))
    assert isinstance(outcome, Infeasible)
    assert "limit" in outcome.explanation
    assert outcome.fixes


def test_impossible_ttft_is_explained(small_inputs: PlannerInputs) -> None:
    sla = SLA(ttft_p90_s=0.05, ttft_p99_s=0.1)
    outcome = make_plan(replace(small_inputs, sla=sla))
    assert isinstance(outcome, Infeasible)
    text = outcome.explanation
    assert text.startswith("TTFT P")
    assert "cannot be met" in text
    assert "prefill of the" in text
    assert "raise the TTFT target or add faster P chips" in text
    assert outcome.to_dict()["feasible"] is False


def test_plan_is_deterministic(small_inputs: PlannerInputs, small_plan: Any) -> None:
    again = make_plan(small_inputs)
    assert again.to_dict() == small_plan.to_dict()


def test_reference_plan_is_confirmed_by_the_simulator(reference_plan: Any) -> None:
    assert isinstance(reference_plan, Plan)
    predicted = reference_plan.predicted
    assert predicted["sla_met"] is True
    assert predicted["rejected"] <= 0.01 * predicted["requests"]
    sla_checks = (
        predicted["ttft_p90"] <= 2.0,
        predicted["ttft_p99"] <= 5.0,
        predicted["tpot_p90"] <= 0.05,
        predicted["tpot_p99"] <= 0.1,
    )
    assert all(sla_checks)


def test_reference_plan_beats_the_best_homogeneous_design(reference_plan: Any) -> None:
    base = reference_plan.baseline["predicted"]
    assert base["sla_met"] is True
    assert reference_plan.predicted["bcr"] > base["bcr"]


def test_reference_plan_stays_within_its_limits(reference_plan: Any) -> None:
    used = _chips_used(reference_plan)
    assert used.get(("dc-a", "gpu-a"), 0) <= 256
    assert used.get(("dc-b", "gpu-b"), 0) <= 128
    assert {p.role for p in reference_plan.pools} == {"P", "RLD", "MD"}
    md = next(p for p in reference_plan.pools if p.role == "MD")
    assert (md.site, md.chip) == ("dc-b", "gpu-b")
