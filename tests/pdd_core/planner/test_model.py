"""The analytic model's parts: queueing, the hit transform, round trips, handoff, bathtub."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_core.planner import (
    PlannerInputs,
    Verification,
    design_from_dict,
    hit_grid,
    prepare,
    verification_from_dict,
    verify,
)
from pdd_core.planner.capacity import erlang_c, gg_wait
from pdd_core.planner.handoff import choose_handoff
from pdd_core.planner.profile import profile_from_requests


def test_erlang_c_known_values() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(3, 3.0) == 1.0
    assert erlang_c(4, 0.0) == 0.0


def test_gg_wait_grows_with_burstiness() -> None:
    service = np.array([1.0, 1.0, 1.0])
    smooth = gg_wait(2, 1.0, service, 1.0)
    bursty = gg_wait(2, 1.0, service, 4.0)
    assert smooth.p_wait == bursty.p_wait
    # deterministic service (cs^2 = 0): the factor is ca^2 / 2, so 4x burstier waits 4x longer
    assert bursty.mean_s == pytest.approx(smooth.mean_s * 4)
    assert gg_wait(1, 2.0, service, 1.0).mean_s == math.inf


def test_with_mean_hit_reaches_the_target_and_keeps_the_ends(small_inputs: PlannerInputs) -> None:
    profile = profile_from_requests(small_inputs.requests, block_size=512, cache_tokens=None)
    for target in (0.2, 0.5, 0.95):
        shaped = profile.with_mean_hit(target)
        assert shaped.mean_hit == pytest.approx(target, abs=0.01)
        assert np.all(shaped.hit_tokens <= shaped.input_tokens)
    zero = profile.hit_ratio == 0
    assert np.all(profile.with_mean_hit(0.5).hit_tokens[zero] == 0)


def test_profile_is_deterministic(small_inputs: PlannerInputs) -> None:
    a = profile_from_requests(small_inputs.requests, block_size=512, cache_tokens=None, seed=1)
    b = profile_from_requests(small_inputs.requests, block_size=512, cache_tokens=None, seed=1)
    assert np.array_equal(a.hit_tokens, b.hit_tokens)
    assert a.rate_rps == b.rate_rps > 0


def test_designs_and_verifications_round_trip(small_inputs: PlannerInputs) -> None:
    prepared = prepare(small_inputs)
    design = prepared.found.pdd[0].design
    assert design_from_dict(design.to_dict()) == design
    checked = verify(small_inputs, design)
    again: Verification = verification_from_dict(checked.to_dict())
    assert again.design == design
    assert again.summary.bcr == checked.summary.bcr
    assert again.cause == checked.cause


def test_search_ranks_feasible_designs_within_limits(small_inputs: PlannerInputs) -> None:
    prepared = prepare(small_inputs)
    assert prepared.found.pdd and prepared.found.baseline
    # Cheapest first, then the most good requests per dollar: closed-loop sessions offer each
    # design the rate its own latency lets them (``planner.paced``), so BCR need not follow cost.
    ranks = [(s.evaluation.cost_per_hour, -s.evaluation.bcr) for s in prepared.found.pdd]
    assert ranks == sorted(ranks)
    for scored in prepared.found.pdd:
        assert scored.evaluation.meets_sla
        chips = sum(p.chips for p in scored.design.pools if p.site == "dc-a")
        assert chips <= small_inputs.limit("dc-a", "h800")


def test_handoff_thresholds_follow_the_extend_cost(small_inputs: PlannerInputs) -> None:
    prepared = prepare(small_inputs)
    design = prepared.found.pdd[0].design
    choice = choose_handoff(prepared.evaluator, design, 0.2)
    table = choice.table
    assert table.handoff_chunk_tokens == table.extend_decode_min_tokens
    assert table.handoff_chunk_tokens & (table.handoff_chunk_tokens - 1) == 0  # power of two
    assert 0.3 <= table.rld_load_threshold <= 0.95
    assert choice.extend_100_s > 0
    assert "token-ID handoff" in choice.reason


def test_bathtub_marks_valley_and_current(small_plan: object) -> None:
    tub = small_plan.bathtub  # type: ignore[attr-defined]
    assert [p.hit_rate for p in tub.points] == pytest.approx(hit_grid(11), abs=0.02)
    assert 0 <= tub.valley_index < len(tub.points)
    assert tub.current.goodput_rps > 0
    assert all(p.revenue_per_cost >= 0 for p in tub.points)


def test_a_design_keeps_its_chunk_budget_through_json_and_into_the_simulator(
    small_inputs: PlannerInputs,
) -> None:
    from dataclasses import replace

    from pdd_core.planner.verify import topology_of

    design = prepare(small_inputs).found.pdd[0].design
    chunked = replace(design, prefill=replace(design.prefill, chunk_tokens=1024))
    assert design_from_dict(chunked.to_dict()) == chunked
    pools = topology_of(small_inputs, chunked).pools_of(chunked.prefill.role)
    assert {p.chunk_tokens for p in pools} == {1024}
