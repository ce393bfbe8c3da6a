"""Request ids are unique per site in ``RequestKey``; on PostgreSQL the records table becomes
partitioned by day of ``finish_time`` (see ``controlplane.telemetry.partitions``).

The conversion keeps every row, index, check and foreign key: the old table is renamed, a
partitioned one is made ``LIKE`` it with the primary key ``(id, finish_time)`` (a partitioned
table's keys must hold the partition key), one partition is made per day the rows cover (plus
today and the next two), the rows are copied and the old table's indexes and foreign keys are
recreated on the new one under their names. Reversing makes it a plain table the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import migrations, models

TABLE = "telemetry_requestrecord"
OLD = "telemetry_requestrecord_unpartitioned"


def _create_partition(cursor: Any, day: Any) -> None:
    start = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
    cursor.execute(
        f'CREATE TABLE IF NOT EXISTS "{TABLE}_p{day:%Y%m%d}" PARTITION OF "{TABLE}" '
        f"FOR VALUES FROM ('{start.isoformat()}') TO ('{(start + timedelta(days=1)).isoformat()}')"
    )


def _rebuild(cursor: Any, partition: bool) -> None:
    """Recreate the records table, partitioned by day or plain, with its rows, checks,
    indexes and foreign keys (captured before the rename: their definitions name the new
    table once the old one is dropped)."""
    cursor.execute(
        "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname <> %s",
        [TABLE, f"{TABLE}_pkey"],
    )
    indexes = [row[0].replace(" ON ONLY ", " ON ") for row in cursor.fetchall()]
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype = 'f'", [TABLE],
    )  # fmt: skip
    foreign = cursor.fetchall()
    cursor.execute(f'ALTER TABLE "{TABLE}" RENAME TO "{OLD}"')
    by_day = " PARTITION BY RANGE (finish_time)" if partition else ""
    cursor.execute(
        f'CREATE TABLE "{TABLE}" (LIKE "{OLD}" INCLUDING CONSTRAINTS){by_day}'
    )
    if partition:
        cursor.execute(
            f"SELECT DISTINCT (finish_time AT TIME ZONE 'UTC')::date FROM \"{OLD}\" "
            "UNION SELECT (now() AT TIME ZONE 'UTC')::date + n FROM generate_series(0, 2) n"
        )
        for (day,) in cursor.fetchall():
            _create_partition(cursor, day)
    cursor.execute(f'INSERT INTO "{TABLE}" SELECT * FROM "{OLD}"')
    cursor.execute(f'SELECT coalesce(max(id), 0) + 1 FROM "{OLD}"')
    (next_id,) = cursor.fetchone()
    # The id's identity (or owned sequence) goes with the old table; the new one gets a
    # sequence default: PostgreSQL before 17 has no identity columns on partitioned tables.
    cursor.execute(f'DROP TABLE "{OLD}"')
    sequence = f"{TABLE}_id_seq"
    cursor.execute(f'CREATE SEQUENCE "{sequence}" OWNED BY "{TABLE}".id')
    cursor.execute(f"SELECT setval('\"{sequence}\"', %s, false)", [next_id])
    cursor.execute(
        f"ALTER TABLE \"{TABLE}\" ALTER COLUMN id SET DEFAULT nextval('\"{sequence}\"')"
    )
    key = "id, finish_time" if partition else "id"
    cursor.execute(f'ALTER TABLE "{TABLE}" ADD PRIMARY KEY ({key})')
    for definition in indexes:
        cursor.execute(definition)
    for name, definition in foreign:
        cursor.execute(f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{name}" {definition}')


def partition_records(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            _rebuild(cursor, partition=True)


def unpartition_records(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            _rebuild(cursor, partition=False)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_api_token_site"),
        ("telemetry", "0003_request_id_unique_per_site"),
    ]

    operations = [
        migrations.CreateModel(
            name="RequestKey",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("site", models.CharField(max_length=64)),
                ("request_id", models.CharField(max_length=128)),
                (
                    "finish_time",
                    models.DateTimeField(help_text="the record's, to prune keys with records"),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("site", "request_id"), name="requestkey_unique")
                ],
                "indexes": [models.Index(fields=["finish_time"], name="requestkey_finish")],
            },
        ),  # fmt: skip
        migrations.RunSQL(
            "INSERT INTO telemetry_requestkey (site, request_id, finish_time) "
            "SELECT site, request_id, finish_time FROM telemetry_requestrecord",
            migrations.RunSQL.noop,
        ),
        migrations.RemoveConstraint(
            model_name="requestrecord", name="requestrecord_unique_site_request"
        ),
        migrations.AlterField(
            model_name="requestrecord", name="batch", field=models.UUIDField(editable=False)
        ),
        migrations.AddIndex(
            model_name="requestrecord",
            index=models.Index(fields=["site", "request_id"], name="requestrecord_site_request"),
        ),
        migrations.RunPython(partition_records, unpartition_records),
    ]
