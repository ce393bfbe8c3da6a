"""The agentic generator as a stream (issue #29 item 3): the same requests as the list, in the
same order, drawn a session at a time."""

from __future__ import annotations

from dataclasses import replace
from itertools import islice

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdd_core.scenario import WorkloadSpec
from pdd_core.workload import (
    AgenticWorkload,
    Request,
    SessionStream,
    generate_agentic,
    in_arrival_order,
    stream_agentic,
)

CASES = [
    (AgenticWorkload(), 0),
    (AgenticWorkload(sessions=40, turns_mean=5), 3),
    # Compaction often (small context), a large singular slice.
    (AgenticWorkload(sessions=30, max_context_tokens=20_000, singular_share=0.3), 5),
    (AgenticWorkload(sessions=25, singular_share=0.0), 2),
    # Sessions much faster than their turns: many under way at once, ties at the millisecond.
    (AgenticWorkload(sessions=300, session_rate_per_s=50.0, turns_mean=3, turn_gap_s=0.01), 11),
]


@pytest.mark.parametrize(("params", "seed"), CASES)
def test_the_stream_yields_exactly_the_list_of_the_same_parameters_and_seed(params, seed):
    listed = generate_agentic(params, seed=seed)
    stream = stream_agentic(params, seed=seed)
    assert list(stream) == listed
    assert stream.requests == len(listed)
    # A second pass draws the same requests again.
    assert list(stream) == listed


@pytest.mark.parametrize(("params", "seed"), CASES)
def test_each_group_is_one_session_in_turn_order_groups_by_first_arrival(params, seed):
    groups = list(stream_agentic(params, seed=seed).sessions())
    firsts = [(turns[0].arrival_s, turns[0].id) for turns in groups]
    assert firsts == sorted(firsts)
    for turns in groups:
        assert {r.session for r in turns} == {turns[0].session}
        assert [r.turn for r in turns] == list(range(1, len(turns) + 1))
    assert sum(len(turns) for turns in groups) == stream_agentic(params, seed=seed).requests
    by_id = {r.id: r for turns in groups for r in turns}
    assert by_id == {r.id: r for r in generate_agentic(params, seed=seed)}
    assert len({turns[0].session for turns in groups}) == len(groups)


def test_a_scenario_workload_streams_its_requests_with_the_time_scale():
    spec = WorkloadSpec(generator=AgenticWorkload(sessions=20, turns_mean=6), seed=4,
                        time_scale=0.5)  # fmt: skip
    stream = spec.stream()
    assert isinstance(stream, SessionStream)
    assert list(stream) == spec.requests()


def test_a_cut_workload_is_not_streamed():
    # ``max_requests`` keeps the first N requests by arrival, which would split sessions.
    spec = WorkloadSpec(generator=AgenticWorkload(sessions=20, turns_mean=6), max_requests=50)
    assert spec.stream() == spec.requests()


def _request(session: str, turn: int, arrival_s: float) -> Request:
    return Request(f"{session}-t{turn}", arrival_s, 100, 10, session=session, turn=turn)


def test_requests_come_in_arrival_order_drawing_sessions_only_as_needed():
    # Given sessions in order of their first turn, each spanning a while.
    sessions = [
        tuple(_request(f"s{k:02d}", t, k * 10.0 + t * 4.0) for t in range(1, 6)) for k in range(50)
    ]
    drawn = []

    def source():
        for turns in sessions:
            drawn.append(turns[0].session)
            yield turns

    # When the first requests are taken, only the sessions begun by then have been drawn.
    head = list(islice(in_arrival_order(source()), 6))
    assert [r.arrival_s for r in head] == [4.0, 8.0, 12.0, 14.0, 16.0, 18.0]
    assert len(drawn) == 3
    # And the whole stream is every request sorted by (arrival, id).
    everything = [r for turns in sessions for r in turns]
    expected = sorted(everything, key=lambda r: (r.arrival_s, r.id))
    assert list(in_arrival_order(iter(sessions))) == expected


def test_equal_arrivals_across_sessions_come_by_id():
    a = (_request("a", 1, 0.0), _request("a", 2, 5.0))
    b = (_request("b", 1, 5.0), _request("b", 2, 6.0))
    assert [r.id for r in in_arrival_order([a, b])] == ["a-t1", "a-t2", "b-t1", "b-t2"]
    c = (_request("c", 1, 1.0), replace(_request("c", 2, 5.0), id="0-first"))
    assert [r.id for r in in_arrival_order([a, c])] == ["a-t1", "c-t1", "0-first", "a-t2"]


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.lists(st.integers(0, 20), min_size=0, max_size=6)),
        min_size=0,
        max_size=25,
    )
)
def test_any_sessions_in_first_turn_order_come_out_sorted_by_arrival_and_id(drawn):
    # Sessions start at whole seconds (ties likely) and their turns follow at gaps of 0-20 s.
    sessions = []
    for index, (start, gaps) in enumerate(sorted(drawn, key=lambda d: d[0])):
        times = [float(start)]
        for gap in gaps:
            times.append(times[-1] + gap)
        sessions.append(tuple(_request(f"s{index:03d}", t, at) for t, at in enumerate(times, 1)))
    everything = [r for turns in sessions for r in turns]
    expected = sorted(everything, key=lambda r: (r.arrival_s, r.id))
    assert list(in_arrival_order(sessions)) == expected
