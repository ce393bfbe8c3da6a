"""Daily partitions of the request records on PostgreSQL: retention is a partition drop.

``telemetry_requestrecord`` is ``PARTITION BY RANGE (finish_time)`` with one partition per UTC
day, named ``telemetry_requestrecord_pYYYYMMDD`` (migration ``0004``). Partitions are created
ahead by the prune task (today and the next ``AHEAD_DAYS``) and, for a day nobody created yet
(a late or replayed record), by ingestion before it writes (``partitions_ensure``: one catalog
look-up per batch, no per-process cache that a drop or a rollback elsewhere could make stale;
an advisory lock serialises concurrent creators and ``IF NOT EXISTS`` makes the second a
no-op). Retention drops every partition that ends at or before the cutoff
(``partitions_drop_before``).

On other databases (SQLite on the embedded defaults) the table is a plain table: every function
here is a no-op there and retention deletes rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction

from controlplane.telemetry.models import RequestRecord

AHEAD_DAYS = 2
# pg_advisory_xact_lock key: "pddpart" in ASCII, any constant unique to this use.
_LOCK_KEY = 0x70646470617274


def partitioned() -> bool:
    return connection.vendor == "postgresql"


def _table() -> str:
    return RequestRecord._meta.db_table


def partition_name(day: date) -> str:
    return f"{_table()}_p{day:%Y%m%d}"


def day_of(when: datetime) -> date:
    """The UTC day (partition) a finish time falls in."""
    return when.astimezone(UTC).date()


def partition_days() -> list[date]:
    """The days that have a partition, oldest first."""
    if not partitioned():
        return []
    prefix = f"{_table()}_p"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [_table()],
        )
        names = [row[0] for row in cursor.fetchall()]
    return sorted(
        datetime.strptime(n.removeprefix(prefix), "%Y%m%d").date()
        for n in names
        if n.startswith(prefix)
    )


def _missing(days: set[date]) -> list[date]:
    names = {partition_name(d): d for d in days}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NULL", [list(names)]
        )
        return sorted(names[row[0]] for row in cursor.fetchall())


def partition_create_sql(day: date) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of ``day``'s partition (DDL takes no parameters: the
    bounds are ISO literals made here from a ``date``)."""
    qn = connection.ops.quote_name
    start = datetime.combine(day, time(), tzinfo=UTC)
    bounds = (start.isoformat(), (start + timedelta(days=1)).isoformat())
    return (f"CREATE TABLE IF NOT EXISTS {qn(partition_name(day))} PARTITION OF {qn(_table())} "
            f"FOR VALUES FROM ('{bounds[0]}') TO ('{bounds[1]}')")  # fmt: skip


def partitions_ensure(days: Iterable[date]) -> list[date]:
    """Create the partitions of ``days`` that do not exist yet; returns their days."""
    if not partitioned():
        return []
    missing = _missing(set(days))
    if not missing:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        for day in missing:
            cursor.execute(partition_create_sql(day))
    return missing


def partitions_ahead(today: date) -> list[date]:
    """Make sure today's and the next ``AHEAD_DAYS`` days' partitions exist."""
    return partitions_ensure(today + timedelta(days=n) for n in range(AHEAD_DAYS + 1))


def partitions_drop_before(cutoff: datetime) -> tuple[list[date], int]:
    """Drop every partition whose whole day ends at or before ``cutoff``: their days, and how
    many records they held (counted before the drop, to report what retention removed)."""
    if not partitioned():
        return [], 0
    qn = connection.ops.quote_name
    dropped = [d for d in partition_days() if d + timedelta(days=1) <= day_of(cutoff)]
    rows = 0
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        # Rows written earlier in an enclosing transaction leave deferred foreign-key checks
        # pending, and PostgreSQL refuses to drop a table that has them: check them now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for day in dropped:
            cursor.execute(f"SELECT count(*) FROM {qn(partition_name(day))}")
            rows += int(cursor.fetchone()[0])
            cursor.execute(f"DROP TABLE {qn(partition_name(day))}")
    return dropped, rows
