"""Processor-sharing flows on one link (``FairShareLink``), held to the transfer formula."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.fairshare import FairShareLink, FlowCompletion
from pdd_core.specs import LinkKind, LinkSpec
from pdd_core.transfer import ideal_transfer_s
from tests.pdd_core.links import GB, JITTERY, LINE, NO_RTT


def test_fair_share_link_charges_setup_and_slow_start_like_the_formula() -> None:
    link = FairShareLink(LINE, setup_s=0.002, initial_window_bytes=1e6)
    link.start("a", GB, now=0.0)
    expected = ideal_transfer_s(GB, 1e9, 0.01, setup_s=0.002, initial_window_bytes=1e6)
    assert link.finish_times()["a"] == pytest.approx(expected)


def test_two_equal_flows_finish_at_twice_the_time() -> None:
    link = FairShareLink(LINE)
    link.start("a", GB, now=0.0)
    link.start("b", GB, now=0.0)

    # Each gets half of 1e9 B/s: 2 s of bytes, then the 10 ms round trip.
    assert link.finish_times() == {"a": pytest.approx(2.01), "b": pytest.approx(2.01)}
    done = link.advance(3.0)
    assert [c.flow_id for c in done] == ["a", "b"]
    assert done[0] == FlowCompletion("a", GB, 0.0, pytest.approx(2.01))
    assert len(link) == 0


def test_a_flow_starting_midway_moves_the_first_completion() -> None:
    # Given one flow alone, due at 1 s
    link = FairShareLink(NO_RTT)
    link.start("first", GB, now=0.0)
    assert link.next_completion() == ("first", pytest.approx(1.0))

    # When a second flow starts at 0.5 s (first has 0.5 GB left, now at half rate)
    link.start("second", GB, now=0.5)

    # Then first drains at 0.5 + 0.5 / 0.5 = 1.5 s; second has 0.5 GB left then, alone: 2.0 s
    assert link.finish_times() == {"first": pytest.approx(1.5), "second": pytest.approx(2.0)}
    assert link.advance(1.49) == []
    assert [c.flow_id for c in link.advance(1.5)] == ["first"]
    assert link.active_flows == 1
    assert link.next_completion() == ("second", pytest.approx(2.0))
    assert [c.finished_s for c in link.advance(2.5)] == [pytest.approx(2.0)]
    assert link.next_completion() is None


def test_rtt_tail_uses_no_bandwidth() -> None:
    # a drains at 1 s and completes at 1.01 s; b shares only until a's last byte.
    link = FairShareLink(LINE)
    link.start("a", 0.5 * GB, now=0.0)
    link.start("b", 1.5 * GB, now=0.0)

    times = link.finish_times()
    assert times["a"] == pytest.approx(1.01)
    # b: 0.5 GB by 1 s at half rate, then 1 GB alone: 2 s, then the RTT.
    assert times["b"] == pytest.approx(2.01)


def test_cancel_returns_unsent_bytes_and_frees_the_share() -> None:
    link = FairShareLink(NO_RTT)
    link.start("a", GB, now=0.0)
    link.start("b", GB, now=0.0)

    assert link.cancel("b", now=1.0) == pytest.approx(0.5 * GB)
    assert link.finish_times() == {"a": pytest.approx(1.5)}
    with pytest.raises(KeyError):
        link.cancel("b", now=1.0)


def test_zero_byte_flow_completes_after_the_round_trip() -> None:
    link = FairShareLink(LINE)
    link.start("empty", 0, now=5.0)

    assert link.active_flows == 0
    assert [c.finished_s for c in link.advance(5.01)] == [pytest.approx(5.01)]


def test_misuse_raises() -> None:
    link = FairShareLink(LINE)
    link.start("a", 10, now=1.0)
    with pytest.raises(ValueError, match="already"):
        link.start("a", 10, now=1.0)
    with pytest.raises(ValueError, match="backwards"):
        link.advance(0.5)
    with pytest.raises(ValueError, match="nbytes"):
        link.start("b", -5, now=2.0)


def test_seeded_flow_jitter_is_reproducible() -> None:
    def run(seed: int) -> dict[object, float]:
        link = FairShareLink(JITTERY, rng=np.random.default_rng(seed))
        for i in range(5):
            link.start(i, GB * (i + 1), now=0.1 * i)
        return link.finish_times()

    assert run(11) == run(11)
    assert run(11) != run(12)


def _drive(link: FairShareLink) -> dict[object, float]:
    # Event loop of a simulator: jump to the next completion until the link is idle.
    finished: dict[object, float] = {}
    while (upcoming := link.next_completion()) is not None:
        for c in link.advance(upcoming[1]):
            finished[c.flow_id] = c.finished_s
    return finished


flows_strategy = st.lists(
    st.tuples(st.floats(min_value=0, max_value=5), st.floats(min_value=0, max_value=3e9)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(flows_strategy)
def test_driving_by_events_matches_the_prediction(flows: list[tuple[float, float]]) -> None:
    # Start every flow, in time order, then follow next_completion: the finish times must equal
    # what finish_times() predicted once nothing else was going to start.
    link = FairShareLink(JITTERY, rng=np.random.default_rng(0))
    for i, (start, size) in enumerate(sorted(flows)):
        link.advance(start)
        link.start(i, size, now=start)
    predicted = link.finish_times()

    finished = _drive(link)

    assert finished.keys() == predicted.keys()
    for key, value in predicted.items():
        assert finished[key] == pytest.approx(value, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1, max_value=3e9), min_size=1, max_size=20))
def test_link_is_work_conserving(sizes: list[float]) -> None:
    # Flows that all start at 0 keep the line busy until the last byte: that moment is
    # total bytes / bandwidth, whatever the order in which they drain.
    link = FairShareLink(NO_RTT)
    for i, size in enumerate(sizes):
        link.start(i, size, now=0.0)

    assert max(_drive(link).values()) == pytest.approx(sum(sizes) / NO_RTT.bytes_per_s, rel=1e-9)


def test_set_link_changes_the_share_from_now_on() -> None:
    # 1 GB at 1e9 B/s; at 0.5 s the line drops to 4 Gbps (5e8 B/s): 0.5 GB left takes 1 s more.
    link = FairShareLink(NO_RTT)
    link.start("a", GB, now=0.0)
    slower = LinkSpec(
        id="bare", kind=LinkKind.WAN, source_site="a", target_site="b", bandwidth_gbps=4, rtt_ms=0
    )

    link.set_link(slower, now=0.5)

    assert link.finish_times() == {"a": pytest.approx(1.5)}
    assert link.link is slower


def test_advancing_to_a_predicted_time_always_completes_the_flow() -> None:
    # An event loop advancing to next_completion() must see the flow done there, even with
    # awkward sizes and a large wall-clock time base where float rounding bites.
    link = FairShareLink(JITTERY, rng=np.random.default_rng(5))
    base = 1.7e9
    for i in range(7):
        link.start(i, GB / 3 * (i + 1), now=base + i / 7)
    while (upcoming := link.next_completion()) is not None:
        assert link.advance(upcoming[1]) != []


@settings(max_examples=60, deadline=None)
@given(
    flows=st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(1e3, 5e9)), min_size=1, max_size=12),
    more=st.floats(1.0, 8.0),
)
def test_more_bandwidth_never_finishes_any_flow_later(
    flows: list[tuple[float, float]], more: float
) -> None:
    # The same transfers starting at the same times: under processor sharing every one of
    # them completes no later on a faster line (the WAN part of "more bandwidth never lowers
    # PDD goodput"; the router's choices on top of it are another matter, docs/simulator.md).
    slow = LinkSpec(
        id="s", kind=LinkKind.WAN, source_site="a", target_site="b", bandwidth_gbps=10, rtt_ms=20
    )
    fast = LinkSpec(
        id="f",
        kind=LinkKind.WAN,
        source_site="a",
        target_site="b",
        bandwidth_gbps=10 * more,
        rtt_ms=20,
    )
    faster = _completions(fast, flows)
    slower = _completions(slow, flows)
    assert all(f <= s + 1e-9 for f, s in zip(faster, slower, strict=True))


def _completions(spec: LinkSpec, flows: list[tuple[float, float]]) -> list[float]:
    link = FairShareLink(spec, initial_window_bytes=14_600)
    done: dict[int, float] = {}
    starts = sorted((start, index, size) for index, (start, size) in enumerate(flows))
    for start, index, size in starts:
        for completion in link.advance(start):
            done[int(completion.flow_id)] = completion.finished_s  # type: ignore[call-overload]
        link.start(index, size, start)
    while (nxt := link.next_completion()) is not None:
        for completion in link.advance(nxt[1]):
            done[int(completion.flow_id)] = completion.finished_s  # type: ignore[call-overload]
    return [done[i] for i in range(len(flows))]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["start", "cancel", "advance"]),
            st.floats(min_value=0, max_value=0.5),
            st.floats(min_value=0, max_value=2e9),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_next_completion_is_the_earliest_finish_whatever_happened_before(
    ops: list[tuple[str, float, float]],
) -> None:
    # Starts, cancels and advances in any order: the link's next completion is always the
    # earliest of its predicted finishes (the scan that stops early finds the same minimum).
    link = FairShareLink(JITTERY, rng=np.random.default_rng(3))
    now = 0.0
    started = 0
    for op, step, size in ops:
        now += step
        if op == "start":
            link.advance(now)
            link.start(started, size, now=now)
            started += 1
        elif op == "cancel" and len(link):
            victim = min(link.finish_times())
            nbytes = link.flow(victim).nbytes
            assert 0.0 <= link.cancel(victim, now) <= nbytes
        else:
            link.advance(now)
        finishes = link.finish_times()
        upcoming = link.next_completion()
        if not finishes:
            assert upcoming is None
            continue
        assert upcoming is not None
        assert upcoming[1] == min(finishes.values())
        assert 0 <= link.active_flows <= len(link) == len(finishes)
