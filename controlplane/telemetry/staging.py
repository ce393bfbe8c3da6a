"""Rollups without shared row locks at ingestion: deltas are staged, then flushed by one writer.

Ingestion (``services.records_ingest``) sums its new records per finest cell
(``rollups.cells_of``: site, pipeline, tenant, model, 5 s window) and inserts them as one
``RollupPending`` row inside the transaction that claims the records' ``(site, request_id)``
keys (``rollups_stage``). That insert locks nothing another batch needs. After the commit it
calls ``rollups_flush``, which adds every pending delta to the ``TelemetryRollup`` rows and
pushes the changed windows to ``/ws/live/``. One flusher runs at a time (a transaction-scoped
advisory lock on PostgreSQL, a process lock elsewhere), taken without waiting: a call that
finds it busy returns at once, and the flush under way, or the next, takes its delta along.
Under load a flush therefore adds many batches' deltas in one pass over the rows.

Why the rollups stay exact across processes and crashes:

- **Staged once.** The pending row commits or rolls back with the records' keys, and a key is
  claimed by exactly one call (``writes.keys_claim``): a retried or concurrent duplicate
  stages nothing.
- **Flushed once.** A flush claims pending rows with ``DELETE ... RETURNING`` and adds them to
  the rollups in the same transaction. A crash or error before its commit rolls the deletion
  back with the additions (the rows are claimed again later); after the commit the rows are
  gone. Two deletes of one row cannot both return it: the second waits for the first
  transaction and then skips the row (PostgreSQL read committed; SQLite has one writer).
- **Not left behind.** A call that loses the lock race committed its row before trying, so the
  holder, which looks for pending rows again after its own commit and goes round again (up to
  ``MAX_ROUNDS``), sees it. A row stays pending only if the holder ran out of rounds under
  sustained load (the next ingestion's flush takes it) or its process died between commit and
  flush: the periodic ``rollups_flush_task`` (every ``FLUSH_INTERVAL_S`` from beat) takes those,
  and the alert evaluator flushes, waiting for the lock, before it reads.

The totals are sums of integers and histogram counts (``sketch.merge`` adds counts), so the
order in which batches are flushed does not change them; float sums (latency sums, revenue)
differ only by rounding.
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, transaction

from controlplane.telemetry.live import live_publish
from controlplane.telemetry.models import RollupPending
from controlplane.telemetry.rollups import (
    CellKey,
    Delta,
    cells_dump,
    cells_merge,
    cells_of,
    rollup_deltas,
    rollups_apply,
)
from controlplane.telemetry.selectors import prices_by_model

log = logging.getLogger(__name__)

# The beat period of ``rollups_flush_task`` (``controlplane.celery`` repeats the number): the
# longest a committed delta can wait when its own call's flush could not take it.
FLUSH_INTERVAL_S = 2.0
MAX_ROUNDS = 4
CLAIM_LIMIT = 500  # pending rows (ingestion calls) per flush transaction
# The advisory lock key of the one flusher: any fixed 32-bit number no other code uses.
ADVISORY_KEY = zlib.crc32(b"pdd.telemetry.rollups.flush")
_process_lock = threading.Lock()


def rollups_stage(records: Sequence[Mapping[str, Any]]) -> None:
    """Stage the rollup delta of newly stored records (call inside the ingestion transaction).

    Revenue is priced here, at the price book in force at the batch's latest finish, so the
    flush needs nothing but the staged numbers."""
    if not records:
        return
    latest: datetime = max(r["finish_time"] for r in records)
    prices = prices_by_model({r["model"] for r in records}, latest)

    def revenue_of(record: Mapping[str, Any]) -> float:
        book = prices.get(record["model"])
        if book is None:
            return 0.0
        return book.revenue(record["miss_tokens"], record["hit_tokens"], record["output_tokens"])

    cells = cells_dump(cells_of(records, revenue_of))
    RollupPending.objects.create(cells=cells, records=len(records))


@contextmanager
def _flusher_lock(wait: bool) -> Iterator[bool]:
    """Whether this call is the one flusher; call inside the flush transaction."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            if wait:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_KEY])
                yield True
                return
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_KEY])
            row = cursor.fetchone()
        yield row is not None and bool(row[0])
        return
    held = _process_lock.acquire(blocking=wait)
    try:
        yield held
    finally:
        if held:
            _process_lock.release()


def _claim(limit: int) -> list[tuple[Any, int]]:
    """Delete up to ``limit`` pending rows, oldest first; returns their cells and counts."""
    qn = connection.ops.quote_name
    table = qn(RollupPending._meta.db_table)
    skip = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    sql = (f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} ORDER BY id LIMIT %s{skip}) "
           f"RETURNING cells, records")  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        rows = cursor.fetchall()
    return [(json.loads(c) if isinstance(c, str | bytes) else c, int(n)) for c, n in rows]


def _flush_once(wait: bool) -> int | None:
    """One flush transaction; records added, or None if another flusher holds the lock."""
    with transaction.atomic(), _flusher_lock(wait) as held:
        if not held:
            return None
        claimed = _claim(CLAIM_LIMIT)
        if not claimed:
            return 0
        cells: dict[CellKey, Delta] = {}
        for dumped, _ in claimed:
            cells_merge(cells, dumped)
        rows = rollups_apply(rollup_deltas(cells))
        transaction.on_commit(lambda: live_publish(rows))
        return sum(n for _, n in claimed)


def rollups_flush(*, wait: bool = False) -> int:
    """Add the pending deltas to the rollups; returns how many records they counted.

    ``wait``: wait for a flush under way in another call instead of leaving the work to it
    (the alert evaluator does, to read every delta committed before it started)."""
    total = 0
    for _ in range(MAX_ROUNDS):
        added = _flush_once(wait)
        if added is None:
            break
        total += added
        if not RollupPending.objects.exists():
            break
    return total


def rollups_flush_after_ingest() -> int:
    """``rollups_flush`` for ingestion, after its commit: a database error is logged, not
    raised, because the records are stored and their delta stays pending for the next flush."""
    try:
        return rollups_flush()
    except DatabaseError:
        log.exception("rollup flush failed; the deltas stay pending for the next flush")
        return 0
