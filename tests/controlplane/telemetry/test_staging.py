"""Staged rollup deltas (``telemetry.staging``): each committed record is counted exactly once,
whether its own call flushes it, another flush or process does, or a process dies between
staging and flushing or inside a flush; two ingesting processes end with exact rollups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.telemetry import services, staging
from controlplane.telemetry.alerts import alerts_evaluate
from controlplane.telemetry.models import RequestRecord, RollupPending, SlaRule, TelemetryRollup
from controlplane.telemetry.rollups import (
    CellKey,
    Delta,
    RollupKey,
    accumulate,
    cells_dump,
    cells_merge,
    cells_of,
    delta_of,
    rollup_deltas,
)
from controlplane.telemetry.services import records_ingest
from controlplane.telemetry.tasks import rollups_flush_task
from tests import factories
from tests.controlplane.telemetry.conftest import T0, record_at
from tests.controlplane.telemetry.ingest_process import CRASH_EXIT, rollup_mismatches
from tests.controlplane.telemetry.test_rollups import records as record_strategy
from tests.live_server import ROOT, database_url


def _no_revenue(record: Any) -> float:
    return 0.0


def _assert_same(got: dict[RollupKey, Delta], want: dict[RollupKey, Delta]) -> None:
    """Counts and histogram maps exactly equal, float sums equal up to addition order."""
    assert sorted(got) == sorted(want)
    for key, delta in want.items():
        assert got[key].counts == delta.counts, key
        assert got[key].maps == delta.maps, key
        assert got[key].sums == pytest.approx(delta.sums, rel=1e-12, abs=1e-12), key


def _rollups() -> dict[RollupKey, Delta]:
    return {(r.window_s, r.scope, r.key, r.start): delta_of(r)
            for r in TelemetryRollup.objects.all()}  # fmt: skip


def _assert_rollups_match_stored_records() -> None:
    """Every rollup row equals the rollup of the stored records computed from scratch (the
    models in these tests have no price book, so revenue is 0)."""
    assert RequestRecord.objects.exists()
    assert rollup_mismatches() == []


@settings(max_examples=40, deadline=None)
@given(st.lists(record_strategy(), min_size=1, max_size=80), st.data())
def test_staged_cells_survive_json_and_merge_to_the_one_shot_deltas(
    batch: list[dict[str, Any]], data: Any
) -> None:
    cut = data.draw(st.integers(0, len(batch)))
    merged: dict[CellKey, Delta] = {}

    for part in (batch[:cut], batch[cut:]):
        cells_merge(merged, json.loads(json.dumps(cells_dump(cells_of(part, _no_revenue)))))

    _assert_same(rollup_deltas(merged), accumulate(batch, _no_revenue))
    # one batch alone comes back bit for bit, float sums included
    whole = cells_of(batch, _no_revenue)
    again: dict[CellKey, Delta] = {}
    cells_merge(again, json.loads(json.dumps(cells_dump(whole))))
    assert again == whole


def test_cells_staged_by_an_older_process_read_and_unknown_fields_are_refused() -> None:
    older = {"cell": ["dc-a", "P-MD", "acme", "m", 0], "counts": {"requests": 2},
             "sums": {}, "maps": {"ttft_hist": {"7": 2}}}  # fmt: skip
    cells: dict[CellKey, Delta] = {}

    cells_merge(cells, [older, older])

    (delta,) = cells.values()
    assert (delta.counts["requests"], delta.counts["sla_met"]) == (4, 0)
    assert (delta.maps["ttft_hist"], delta.sums["revenue"]) == ({"7": 4}, 0.0)
    with pytest.raises(ValueError, match="unknown fields"):
        cells_merge({}, [{**older, "counts": {"requests": 1, "tokens_v2": 5}}])


def _minute_batch(prefix: str, n: int = 6) -> list[dict[str, Any]]:
    return [record_at(T0 + timedelta(seconds=7 * i), request_id=f"{prefix}{i}",
                      ttft_s=0.1 * (i + 1), rejected=i == 3) for i in range(n)]  # fmt: skip


@pytest.fixture
def died_after_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingestion calls that stop right after their commit (the process died before its own
    flush): their deltas are staged and nothing else happens."""
    monkeypatch.setattr(services, "rollups_flush_after_ingest", lambda: 0)


@pytest.mark.django_db
def test_ingest_flushes_its_own_delta_in_the_same_call(acme: Any) -> None:
    result = records_ingest(records=_minute_batch("r"))

    assert result.accepted == 6
    assert RollupPending.objects.count() == 0
    _assert_rollups_match_stored_records()


@pytest.mark.django_db
def test_delta_left_by_a_dead_process_is_flushed_once_by_the_next_flush(
    acme: Any, died_after_commit: None
) -> None:
    records_ingest(records=_minute_batch("a"))
    records_ingest(records=_minute_batch("b"))
    records_ingest(records=_minute_batch("a"))  # a retry: stages nothing
    assert (RollupPending.objects.count(), TelemetryRollup.objects.count()) == (2, 0)

    flushed = rollups_flush_task()
    after_first = _rollups()
    again = rollups_flush_task()

    assert (flushed, again) == (12, 0)
    assert RollupPending.objects.count() == 0
    _assert_rollups_match_stored_records()
    _assert_same(_rollups(), after_first)


@pytest.mark.django_db
def test_failure_inside_a_flush_rolls_back_its_claim_and_its_additions(
    acme: Any, died_after_commit: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    records_ingest(records=_minute_batch("a"))
    real_apply = staging.rollups_apply

    def apply_then_fail(deltas: Any) -> Any:
        real_apply(deltas)
        raise ConnectionError("the flusher lost the database after writing the rows")

    monkeypatch.setattr(staging, "rollups_apply", apply_then_fail)
    with pytest.raises(ConnectionError):
        staging.rollups_flush()

    assert (RollupPending.objects.count(), TelemetryRollup.objects.count()) == (1, 0)
    monkeypatch.setattr(staging, "rollups_apply", real_apply)
    assert staging.rollups_flush() == 6
    _assert_rollups_match_stored_records()


@contextmanager
def _another_flusher_running() -> Iterator[None]:
    """Hold the flusher lock as a flush in another process (PostgreSQL) or thread would."""
    if connection.vendor == "postgresql":
        with psycopg.connect(database_url(connection.settings_dict)) as other:
            other.execute("SELECT pg_advisory_lock(%s)", [staging.ADVISORY_KEY])
            yield
            other.execute("SELECT pg_advisory_unlock(%s)", [staging.ADVISORY_KEY])
        return
    with staging._process_lock:
        yield


@pytest.mark.django_db
def test_a_busy_flusher_is_not_waited_for_and_the_next_flush_takes_the_delta(
    acme: Any,
) -> None:
    with _another_flusher_running():
        result = records_ingest(records=_minute_batch("a"))
        skipped = staging.rollups_flush()

    assert (result.accepted, skipped) == (6, 0)
    assert (RollupPending.objects.count(), TelemetryRollup.objects.count()) == (1, 0)
    assert staging.rollups_flush() == 6
    _assert_rollups_match_stored_records()


@pytest.mark.django_db(transaction=True)
def test_the_alert_evaluator_reads_deltas_no_ingestion_flushed(
    acme: Any, died_after_commit: None
) -> None:
    SlaRule.objects.create(slug="ttft", name="TTFT P90", metric="ttft_p90", threshold=0.3,
                           window_s=60)  # fmt: skip
    records_ingest(records=_minute_batch("a"))
    assert RollupPending.objects.count() == 1

    result = alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))

    assert result.opened == 1
    assert RollupPending.objects.count() == 0


def _ingest_processes(
    *argvs: list[str], env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Run ``ingest_process`` once per argv, all at the same time, against the test database
    (or the environment ``env``)."""
    env = env or {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
                  "PYTHONPATH": str(ROOT), "PDD_LOG_LEVEL": "WARNING"}  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.controlplane.telemetry.ingest_process", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def _wait_for_no_flusher(timeout_s: float = 60.0) -> None:
    """Wait until no session holds the flusher's advisory lock: a client that died inside its
    flush leaves a server backend that holds it until PostgreSQL notices the closed socket and
    rolls its transaction back; a non-waiting flush meanwhile (rightly) leaves the work to it."""
    sql = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    deadline = time.monotonic() + timeout_s
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [staging.ADVISORY_KEY])
            (held,) = cursor.fetchone()
        if not held or time.monotonic() > deadline:
            assert not held, "the crashed flusher's backend still holds the lock"
            return
        time.sleep(0.05)


@pytest.fixture
def two_tenants(db: Any) -> None:
    factories.record_world("acme", "globex", models=("m",))


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_two_ingesting_processes_leave_exact_rollups(two_tenants: None) -> None:
    # given two processes posting their own records and the same shared ones, concurrently
    batches, size = 8, 50
    results = _ingest_processes(["a,shared", str(batches), str(size)],
                                ["b,shared", str(batches), str(size)])  # fmt: skip

    # then every record is stored once and each rollup row counts it once
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    accepted = sum(int(r.stdout.split()[-1]) for r in results)
    assert accepted == RequestRecord.objects.count() == 3 * batches * size
    staging.rollups_flush(wait=True)  # a flusher out of rounds may have left the last ones
    assert RollupPending.objects.count() == 0
    _assert_rollups_match_stored_records()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_process_killed_inside_its_flush_loses_nothing_and_counts_once(
    two_tenants: None,
) -> None:
    (crashed,) = _ingest_processes(["a", "3", "40", "--crash-in-flush"])

    # the first batch was committed and staged; the flush that died had updated the rows
    assert crashed.returncode == CRASH_EXIT, crashed.stderr[-2000:]
    assert RequestRecord.objects.count() == 40
    assert (RollupPending.objects.count(), TelemetryRollup.objects.count()) == (1, 0)

    # the server ends the dead client's session (and its flusher lock) on its own schedule
    _wait_for_no_flusher()
    assert rollups_flush_task() == 40
    assert rollups_flush_task() == 0
    _assert_rollups_match_stored_records()


def test_two_ingesting_processes_on_the_embedded_defaults_leave_exact_rollups(
    tmp_path: Path,
) -> None:
    # given the embedded defaults: a SQLite file, the in-memory channel layer, no Redis
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'pdd.sqlite3'}", PDD_DATA_DIR=str(tmp_path),
               PYTHONPATH=str(ROOT), PDD_LOG_LEVEL="WARNING")  # fmt: skip
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    tenants = "from tests import factories; factories.record_world('acme', 'globex', models=('m',))"
    subprocess.run([*manage, "shell", "-c", tenants], cwd=ROOT, env=env, check=True)

    # when two processes ingest their own and the same shared records at the same time
    results = _ingest_processes(["a,shared", "4", "50"], ["b,shared", "4", "50"], env=env)
    (check,) = _ingest_processes(["--check"], env=env)

    # then each record is stored once, nothing stays staged and every rollup row is exact
    every = [*results, check]
    assert [r.returncode for r in every] == [0, 0, 0], [r.stderr[-2000:] for r in every]
    assert sum(int(r.stdout.split()[-1]) for r in results) == 600
    assert json.loads(check.stdout.splitlines()[-1]) == {"records": 600, "left": 0,
                                                         "mismatches": []}  # fmt: skip
