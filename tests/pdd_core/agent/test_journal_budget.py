"""The journal says how many bytes it can still take before a record not yet shipped is lost,
and its default budget holds a 10-minute outage at 100 req/s."""

from __future__ import annotations

from pathlib import Path

from pdd_core.agent.config import JOURNAL_DEFAULT_BYTES
from pdd_core.agent.journal import Journal, JournalSource

RECORD = {"request_id": "r", "note": "x" * 80}  # 100 bytes as a JSON line


def _line_bytes() -> int:
    import json

    return len(json.dumps(RECORD, separators=(",", ":")).encode()) + 1


def test_an_empty_journal_can_take_its_whole_budget(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "gw", 10_000)

    assert journal.budget_remaining_bytes == 10_000


def test_undelivered_records_in_the_older_segment_leave_only_the_current_segments_room(
    tmp_path: Path,
) -> None:
    line = _line_bytes()
    journal = Journal(tmp_path, "gw", 10 * line)  # two segments of five lines
    for _ in range(7):  # five fill the first segment, two start the second
        journal.append(RECORD)

    assert journal.budget_remaining_bytes == 3 * line
    assert journal.dropped == 0


def test_once_the_older_segment_is_shipped_a_whole_segment_is_back(tmp_path: Path) -> None:
    line = _line_bytes()
    journal = Journal(tmp_path, "gw", 10 * line)
    for _ in range(7):
        journal.append(RECORD)
    source = JournalSource(journal)

    source.delivered(len(source.pending(5)))

    assert journal.budget_remaining_bytes == 3 * line + 5 * line


def test_the_default_budget_holds_ten_minutes_at_100_requests_per_second() -> None:
    gateway_record_bytes = 630  # measured: a gateway record with every extra key, as JSON
    outage_records = 600 * 100

    assert outage_records * gateway_record_bytes <= JOURNAL_DEFAULT_BYTES // 2
