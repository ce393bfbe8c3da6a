"""The bounded journal: records in the control plane's shape, oldest dropped and counted."""

from __future__ import annotations

from pathlib import Path

from pdd_core.agent.journal import Journal
from pdd_core.records import RECORD_FIELDS, RequestRecord


def record(n: int) -> dict[str, object]:
    return RequestRecord(
        request_id=f"cmpl-{n}",
        tenant="demo",
        model="tiny-test",
        site="dc-a",
        pipeline="P-MD",
        arrival=1_800_000_000.0,
        finish=1_800_000_001.5,
        hit_tokens=30,
        miss_tokens=12,
        output_tokens=8,
        handoff_mode="none",
    ).to_json()


def test_a_record_has_every_field_of_the_telemetry_api() -> None:
    body = record(1)

    assert set(RECORD_FIELDS) <= set(body)
    assert body["input_tokens"] == body["hit_tokens"] + body["miss_tokens"] == 42
    assert body["arrival_time"] == "2027-01-15T08:00:00Z"
    assert body["finish_time"] == "2027-01-15T08:00:01.500000Z"
    assert body["handoff_mode"] == ""  # the API's "no handoff" choice


def test_the_journal_keeps_the_newest_records_within_its_budget(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "gw", max_bytes=4000)
    for n in range(100):
        journal.append(record(n))

    kept = journal.records()
    size = sum(p.stat().st_size for p in tmp_path.glob("gw*.jsonl"))
    assert size <= 4000
    assert kept[-1]["request_id"] == "cmpl-99"
    assert [r["request_id"] for r in kept] == [f"cmpl-{n}" for n in range(100 - len(kept), 100)]
    assert journal.dropped == 100 - len(kept)


def test_the_drop_count_survives_a_restart(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "gw", max_bytes=2000)
    for n in range(40):
        journal.append(record(n))
    reopened = Journal(tmp_path, "gw", max_bytes=2000)
    reopened.append(record(40))

    assert reopened.dropped >= journal.dropped > 0
    assert reopened.dropped + len(reopened.records()) == 41
