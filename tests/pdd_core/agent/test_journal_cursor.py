"""The journal's shipped cursor: it survives restarts, and rotation counts only unshipped drops."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.agent.journal import Journal, JournalSource


def rec(n: int) -> dict[str, object]:
    # 70-byte lines: seven fit a segment of 500 bytes (max_bytes=1000).
    return {"request_id": f"cmpl-{n:05d}", "pad": "x" * 33}


def ids(records: list[dict[str, object]]) -> list[str]:
    return [str(r["request_id"]) for r in records]


def test_the_cursor_survives_a_restart(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "gw", max_bytes=100_000)
    for n in range(10):
        journal.append(rec(n))
    assert ids(journal.pending(4)) == [f"cmpl-{n:05d}" for n in range(4)]
    journal.delivered(4)

    reopened = Journal(tmp_path, "gw", max_bytes=100_000)

    assert reopened.pending_count == 6
    assert ids(reopened.pending(100)) == [f"cmpl-{n:05d}" for n in range(4, 10)]


def test_a_partly_delivered_batch_advances_only_past_what_arrived(tmp_path: Path) -> None:
    source = JournalSource(Journal(tmp_path, "gw", max_bytes=100_000))
    for n in range(5):
        source.journal.append(rec(n))
    source.pending(5)
    source.delivered(2)

    assert ids(list(map(dict, source.pending(10)))) == [f"cmpl-{n:05d}" for n in range(2, 5)]


def test_rotation_counts_only_the_records_never_shipped(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "gw", max_bytes=1000)  # 7 records a segment
    for n in range(7):
        journal.append(rec(n))
    journal.pending(5)
    journal.delivered(5)  # 5 of the first segment are shipped, 2 are not
    for n in range(7, 21):  # two rotations: the first segment is deleted
        journal.append(rec(n))

    assert journal.dropped == 2
    kept = ids(journal.records())
    assert ids(journal.pending(100)) == kept
    assert journal.pending_count == len(kept)


def test_a_batch_rotated_away_while_in_flight_is_not_counted_lost(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "gw", max_bytes=1000)
    for n in range(7):
        journal.append(rec(n))
    batch = journal.pending(7)
    for n in range(7, 21):  # the batch's segment is deleted before the answer comes
        journal.append(rec(n))
    assert journal.dropped == 7
    journal.delivered(len(batch))

    assert journal.dropped == 0
    assert ids(journal.pending(100)) == ids(journal.records())


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 8), st.integers(0, 9), st.booleans()),
        max_size=25,
    )
)
def test_every_record_is_shipped_or_counted_dropped_exactly_once(
    steps: list[tuple[int, int, int, bool]],
) -> None:
    """Appends (also while a batch is in flight, rotating it away), partial deliveries and
    restarts in any order: shipped + dropped + pending accounts for every record, none is
    shipped twice, and the order is kept."""
    with TemporaryDirectory() as tmp:
        journal = Journal(tmp, "gw", max_bytes=1000)
        appended, shipped = 0, []

        def append(count: int) -> None:
            nonlocal appended
            for _ in range(count):
                journal.append(rec(appended))
                appended += 1

        for before, take, during, restart in steps:
            append(before)
            batch = journal.pending(take)
            append(during)
            done = batch[: max(0, take - 1)]
            journal.delivered(len(done))
            shipped.extend(ids(done))
            if restart:
                journal = Journal(tmp, "gw", max_bytes=1000)
        rest = ids(journal.pending(10_000))
        assert len(shipped) == len(set(shipped))
        assert shipped == sorted(shipped) and rest == sorted(rest)
        assert not set(shipped) & set(rest)
        assert len(shipped) + journal.dropped + len(rest) == appended
        assert journal.pending_count == len(rest)
