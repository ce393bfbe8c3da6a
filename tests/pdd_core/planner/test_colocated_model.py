"""The analytic model's aggregated serving (``planner.colocated``) and closed-loop pacing
(``planner.paced``): each against its own formula, and the aggregated model against the
simulator it screens for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pdd_core.planner import PlannerInputs, inputs_from_scenario, prepare, verify
from pdd_core.planner.capacity import Evaluator
from pdd_core.planner.colocated import steady_state
from pdd_core.planner.design import COLOCATED, Design, PoolChoice
from pdd_core.planner.paced import answer_s, paced_rate
from pdd_core.planner.profile import WorkloadProfile
from pdd_core.planner.stages import evaluate
from pdd_core.scenario import load_scenario
from pdd_core.specs import InstanceShape, Role


@pytest.fixture(scope="module")
def evaluator(small_inputs: PlannerInputs) -> Evaluator:
    return prepare(small_inputs).evaluator


def colocated(inputs: PlannerInputs, instances: int, chunk: int) -> Design:
    pool = PoolChoice("dc-a", "h800", Role.PREFILL, instances, 8, 2, chunk_tokens=chunk)
    return Design(COLOCATED, pool, replace(pool, role=Role.MAIN_DECODE, instances=0), None,
                  inputs.table)  # fmt: skip


def _steady(ev: Evaluator, rate: float, chunk: int = 2048) -> object:
    p = ev.profile
    miss = p.miss_tokens
    return steady_state(
        ev.steps("h800", InstanceShape(tp=8, pp=2)),
        rate=rate,
        output=float(p.output_tokens.mean()),
        miss=float(miss.mean()),
        cached=int(float(p.hit_tokens.mean())),
        context=int(np.mean(p.input_tokens + p.output_tokens / 2)),
        chunk=chunk,
        batch_limit=ev.kv_batch("h800", InstanceShape(tp=8, pp=2), drc=False)[0],
    )


def test_the_steady_state_obeys_littles_law_and_the_chunk_share(evaluator: Evaluator) -> None:
    p = evaluator.profile
    state = _steady(evaluator, 0.5)
    assert state is not None
    # The running batch is the rate times each sequence's stay (its output at one token per
    # iteration); the mixed share is the prompt tokens per iteration over the chunk's room.
    assert state.batch == pytest.approx(0.5 * p.output_tokens.mean() * state.seconds, rel=1e-3)
    assert state.mixed == pytest.approx(
        0.5 * p.miss_tokens.mean() * state.seconds / state.prompt_tokens, rel=1e-3
    )
    # The mean iteration lies between a decode step and a mixed iteration of that batch.
    assert 0 < state.mixed < 1
    assert state.seconds <= state.mixed_s


def test_more_load_means_longer_iterations_until_there_is_no_steady_state(
    evaluator: Evaluator,
) -> None:
    rates = [0.1, 0.5, 1.0, 2.0]
    states = [_steady(evaluator, r) for r in rates]
    found = [s for s in states if s is not None]
    times = [s.seconds for s in found]
    assert times == sorted(times)
    assert [s.batch for s in found] == sorted(s.batch for s in found)
    assert _steady(evaluator, 1e3) is None  # far beyond what the chunks or the KV pool hold


AGGREGATED = (
    Path(__file__).resolve().parents[3] / "fixtures/scenarios/llama70b_h200_aggregated.toml"
)


# Issue 25's aggregated case (open loop, 14.5 req/s of 4,096 in / 500 out): the configurator's
# 8 x TP4 and a pipelined 3 x TP4 x PP2, at 512-token chunks. The simulator's TPOT P50 is its
# typical iteration, which the fixed point's mean iteration stands for (the tail, a request's
# exposure to mixed iterations, is the simulator's to judge: the planner verifies).
@pytest.mark.parametrize(("instances", "tp", "pp"), [(8, 4, 1), (3, 4, 2)])
def test_the_analytic_tpot_of_an_aggregated_design_is_near_the_simulators(
    instances: int, tp: int, pp: int
) -> None:
    inputs = inputs_from_scenario(load_scenario(AGGREGATED))
    assert not inputs.config.closed_loop  # both see the stated rate
    pool = PoolChoice("dc-a", "h200", Role.PREFILL, instances, tp, pp, chunk_tokens=512)
    design = Design(COLOCATED, pool, replace(pool, role=Role.MAIN_DECODE, instances=0), None,
                    inputs.table)  # fmt: skip
    analytic = evaluate(prepare(inputs).evaluator, design)
    simulated = verify(inputs, design).summary
    assert analytic.stable
    assert analytic.tpot["p50"] == pytest.approx(simulated.tpot_p50, rel=0.2)


def _profile(requests: int, sessions: int, rate: float = 2.0) -> WorkloadProfile:
    ones = np.ones(4)
    return WorkloadProfile(rate, 1.0, ones * 1000, ones * 900, ones * 101, requests, sessions)


def test_sessions_that_wait_for_their_answers_are_offered_less() -> None:
    # 1,000 requests in 100 sessions at 2 req/s: the trace spans 500 s; with 10 s answers each
    # session adds 9 answers, 90 s, so the same requests arrive over 590 s.
    profile = _profile(1000, 100)
    assert paced_rate(profile, 10.0) == pytest.approx(1000 / 590)
    assert paced_rate(profile, 0.0) == pytest.approx(2.0)
    assert paced_rate(profile, float("inf")) == 0.0
    # One turn per session: nothing waits, whatever the answer time.
    assert paced_rate(_profile(1000, 1000), 10.0) == pytest.approx(2.0)


def test_a_closed_loop_evaluation_is_the_one_at_its_paced_rate(
    small_inputs: PlannerInputs, evaluator: Evaluator
) -> None:
    assert small_inputs.config.closed_loop and evaluator.profile.turns_per_session > 1
    design = colocated(small_inputs, 1, 2048)
    open_loop = Evaluator(
        model=evaluator.model, chips=evaluator.chips, wan=evaluator.wan, rdma=evaluator.rdma,
        sla=evaluator.sla, prices=evaluator.prices,
        config=replace(evaluator.config, closed_loop=False), profile=evaluator.profile,
    )  # fmt: skip
    first = evaluate(open_loop, design)
    paced = evaluate(evaluator, design)
    rate = paced_rate(evaluator.profile, answer_s(first, evaluator.profile))
    assert rate < evaluator.profile.rate_rps
    again = evaluate(open_loop, design, evaluator.profile.at_rate(rate))
    assert paced.stages[0].utilisation == pytest.approx(again.stages[0].utilisation)
    assert paced.stages[0].utilisation < first.stages[0].utilisation
