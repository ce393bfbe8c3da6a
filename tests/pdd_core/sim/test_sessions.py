"""Closed-loop agentic sessions (issue #12 item 6): a turn arrives after its predecessor's
answer plus the think time, and the simulated hit rate is reported beside the trace's own."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from pdd_core.routing import RoutingTable
from pdd_core.scenario import load_scenario
from pdd_core.sim import SimConfig, simulate
from pdd_core.sim.capacity import arrived_rps, offered_rps
from pdd_core.sim.summary import trace_hits, with_trace_hits
from pdd_core.workload import AgenticWorkload, Request, generate_agentic
from pdd_core.workload.stats import trace_stats

from .conftest import MODEL

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "fixtures" / "scenarios"
TRACES = ROOT / "fixtures" / "traces"
NO_REJECT = RoutingTable(early_rejection=False)
CLOSED = SimConfig(closed_loop=True)


def _workload(gap_s: float = 0.5) -> list[Request]:
    # Short think times: in open loop many turns arrive before their predecessor is answered.
    return generate_agentic(
        AgenticWorkload(
            sessions=6, session_rate_per_s=0.3, turns_mean=6, turn_gap_s=gap_s, singular_share=0
        ),
        seed=4,
    )


def test_each_turn_arrives_after_its_predecessor_ends_plus_the_think_time(pdd_topology):
    requests = _workload()
    result = simulate(pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT, config=CLOSED)
    by_id = {r.id: r for r in result.records}
    assert set(by_id) == {r.id for r in requests}
    turns = defaultdict(list)
    for request in requests:
        turns[request.session].append(request)
    for session in turns.values():
        session.sort(key=lambda r: r.turn)
        first = by_id[session[0].id]
        assert first.arrival_s == session[0].arrival_s
        for earlier, later in pairwise(session):
            think = later.arrival_s - earlier.arrival_s
            assert by_id[later.id].arrival_s == pytest.approx(by_id[earlier.id].finish_s + think)


def test_closed_loop_lets_a_turn_reuse_its_predecessor_prefix(pdd_topology):
    requests = _workload()
    opened = simulate(pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT).summary
    closed = simulate(
        pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT, config=CLOSED
    ).summary
    assert closed.hit_token_weighted > opened.hit_token_weighted


def test_trace_hits_are_the_workload_statistics_of_pdd_trace_stats():
    requests = _workload()
    stats = trace_stats(requests, block_size=512)
    request_weighted, token_weighted = trace_hits(requests, 512)
    assert request_weighted == pytest.approx(stats.request_weighted_hit)
    assert token_weighted == pytest.approx(stats.token_weighted_hit)


def test_the_summary_carries_both_hit_rates(pdd_topology):
    requests = _workload()
    summary = simulate(pdd_topology, "pdd", requests, model_id=MODEL, config=CLOSED).summary
    both = with_trace_hits(summary, trace_hits(requests, 512))
    assert both.trace_hit_token_weighted == trace_hits(requests, 512)[1]
    assert both.hit_token_weighted == summary.hit_token_weighted


def test_closed_loop_arrives_no_faster_than_the_trace_and_capacity_counts_that(pdd_topology):
    # Given the same sessions, a closed-loop turn waits for its predecessor's answer, so every
    # turn arrives no earlier than its trace time and the achieved rate is at most the offered.
    requests = _workload()
    result = simulate(pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT, config=CLOSED)
    trace_time = {r.id: r.arrival_s for r in requests}
    assert all(r.arrival_s >= trace_time[r.id] - 1e-12 for r in result.records)
    achieved = arrived_rps(result.records)
    assert 0 < achieved < offered_rps(requests)
    opened = simulate(pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT)
    assert arrived_rps(opened.records) == pytest.approx(offered_rps(requests))


def test_generated_sessions_run_closed_loop_and_traces_open_loop_by_default(tmp_path):
    small = SCENARIOS / "small.toml"
    assert load_scenario(small).config.closed_loop is True
    assert load_scenario(small, trace=TRACES / "mooncake_conversation_sample.jsonl").config == (
        replace(load_scenario(small).config, closed_loop=False)
    )
    assert load_scenario(SCENARIOS / "mooncake_conversation.toml").config.closed_loop is False
    stated = tmp_path / "open.toml"
    stated.write_text(small.read_text().replace("[engine]\n", "[engine]\nclosed_loop = false\n"))
    assert load_scenario(stated).config.closed_loop is False
