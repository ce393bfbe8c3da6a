"""The bulk writes of ingestion: claim the request keys, then write records and usage.

On PostgreSQL a batch costs three statements whatever its size: the keys are inserted from
column arrays (``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING RETURNING``, which
returns exactly the keys this call inserted), the new records go in by ``COPY`` (no conflict is
possible: their keys are this call's), and the usage rows by ``unnest`` with ``ON CONFLICT DO
NOTHING`` (a record re-reported after retention pruned its key is billed once). Elsewhere
(SQLite) the keys use a multi-row ``VALUES`` with the same ``ON CONFLICT ... RETURNING`` and the
rows go through the ORM's ``bulk_create``.

Concurrent posts of the same ids: the second ``INSERT`` of a key waits on the unique index for
the first transaction, then skips the key, so exactly one call writes each record. Callers pass
the records sorted by key, so two overlapping batches take the index entries in one order and
cannot deadlock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
import psycopg
from django.db import connection
from django.db.models import Field, Model
from django.utils import timezone

from controlplane.accounts.models import ApiToken
from controlplane.billing.models import UsageRecord
from controlplane.telemetry.models import RequestKey, RequestRecord
from pdd_core import records

Record = Mapping[str, Any]
Key = tuple[str, str]
# The columns a record keeps from its report (a repeat must match them all), in table order:
# the data plane's record (pdd_core.records) less its key's request_id, which the row's
# RequestKey holds.
RECORD_FIELDS = tuple(name for name in records.RECORD_FIELDS if name != "request_id")
_KEY_NAMES = ("site", "request_id", "finish_time")
USAGE_FIELDS = (
    "request_id", "tenant", "model", "site", "pipeline", "time", "miss_tokens", "hit_tokens",
    "output_tokens", "sla_met", "config_version", "received_at",
)  # fmt: skip


_JSON = msgspec.json.Encoder()
_JSON_TEXTS = msgspec.json.Decoder(list[str])


def _fields(model: type[Model], names: Sequence[str]) -> list[Field[Any, Any]]:
    return [f for n in names if isinstance(f := model._meta.get_field(n), Field)]


def _postgres() -> bool:
    return connection.vendor == "postgresql"


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int | float):
        return repr(value)
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pg_array(values: Sequence[Any]) -> str:
    """A PostgreSQL array literal of plain values (str, int, float, bool, datetime, UUID,
    None). Built by joining strings: psycopg dumps a list parameter element by element in
    Python, about four times slower for the thousand values of a batch."""
    kinds = set(map(type, values))
    if kinds == {str}:
        joined = "".join(values)  # one scan in C for a quote or backslash to escape
        if '"' not in joined and "\\" not in joined:
            return '{"' + '","'.join(values) + '"}'
    elif kinds == {int}:
        return "{" + ",".join(map(str, values)) + "}"
    elif kinds == {bool}:
        return "{" + ",".join(["t" if v else "f" for v in values]) + "}"
    elif kinds == {datetime}:  # RFC 3339 text has no quote or backslash to escape
        return '{"' + '","'.join(_times(values)) + '"}'
    return "{" + ",".join(map(_element, values)) + "}"


def _unnest_insert(
    model: type[Model], names: Sequence[str], columns: Sequence[list[Any]], suffix: str
) -> list[tuple[Any, ...]]:
    """``INSERT INTO model (names) SELECT * FROM unnest(arrays) <suffix>`` (PostgreSQL)."""
    fields = _fields(model, names)
    qn = connection.ops.quote_name
    arrays = ", ".join(f"%s::{f.db_type(connection)}[]" for f in fields)
    sql = (f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
           f"SELECT * FROM unnest({arrays}) {suffix}")  # fmt: skip
    connection.ensure_connection()
    # A server-side-binding cursor: each array is one text parameter, not quoted into the SQL
    # text by Django's default client-side-binding cursor.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, [pg_array(column) for column in columns])
        return list(cursor.fetchall()) if "RETURNING" in suffix else []


def keys_claim(records: Sequence[Record]) -> set[Key]:
    """Insert the records' ``(site, request_id)`` keys; returns those this call inserted."""
    if not records:
        return set()
    suffix = "ON CONFLICT (site, request_id) DO NOTHING RETURNING site, request_id"
    if _postgres():
        columns = [[r["site"] for r in records], [r["request_id"] for r in records],
                   [r["finish_time"] for r in records]]  # fmt: skip
        return {(s, i) for s, i in _unnest_insert(RequestKey, _KEY_NAMES, columns, suffix)}
    fields = _fields(RequestKey, _KEY_NAMES)
    qn = connection.ops.quote_name
    values = ", ".join(["(%s, %s, %s)"] * len(records))
    sql = (f"INSERT INTO {qn(RequestKey._meta.db_table)} "
           f"({', '.join(qn(f.column) for f in fields)}) VALUES {values} {suffix}")  # fmt: skip
    params = [f.get_db_prep_save(r[f.name], connection) for r in records for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {(s, i) for s, i in cursor.fetchall()}


def records_write(
    records: Sequence[Record], *, batch: uuid.UUID, source_token: ApiToken | None
) -> None:
    """Insert new records (their keys claimed by this call): ``COPY`` on PostgreSQL."""
    if not records:
        return
    now = timezone.now()
    token_id = source_token.pk if source_token is not None else None
    if not _postgres():
        stored = ("request_id", *RECORD_FIELDS)  # a record's other keys (its agent) are not
        RequestRecord.objects.bulk_create(
            [RequestRecord(**{n: r[n] for n in stored}, batch=batch, source_token=source_token)
             for r in records]
        )  # fmt: skip
        return
    names = ("request_id", *RECORD_FIELDS, "batch", "source_token", "received_at")
    qn = connection.ops.quote_name
    columns = ", ".join(qn(f.column) for f in _fields(RequestRecord, names))
    sql = f"COPY {qn(RequestRecord._meta.db_table)} ({columns}) FROM STDIN"
    tail = (batch, token_id, now)
    text = copy_text(records, tail)
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        if text is not None:
            copy.write(text)
        else:  # a value the plain text would not carry as is: psycopg escapes it
            for r in records:
                copy.write_row((r["request_id"], *[r[n] for n in RECORD_FIELDS], *tail))


_NULL = "\\N"  # COPY text's NULL


def _copy_value(value: Any) -> str:
    if value is None:
        return _NULL
    if value is True:
        return "t"
    if value is False:
        return "f"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value) if isinstance(value, str | uuid.UUID | int) else repr(value)


def _times(values: Sequence[datetime]) -> list[str]:
    """RFC 3339 text of aware datetimes (``...Z`` in UTC), as PostgreSQL reads them: msgspec
    writes a thousand in the time ``isoformat`` takes for a dozen."""
    texts: list[str] = _JSON_TEXTS.decode(_JSON.encode(values))
    return texts


def copy_text(records: Sequence[Record], tail: Sequence[Any]) -> str | None:
    """The rows of ``records`` (``request_id``, ``RECORD_FIELDS``, then ``tail``) as one
    ``COPY ... FROM STDIN`` text, or None when a value holds a character the text format
    would have to escape (a tab, newline, carriage return or backslash; validated records
    never do). One ``copy.write`` of this text costs a fraction of psycopg's ``write_row``
    per row, which dumps value by value in Python."""
    end = "\t".join(map(_copy_value, tail)) + "\n"
    arrivals, finishes = (
        _times([r[name] for r in records]) for name in ("arrival_time", "finish_time")
    )
    # The columns in order; the types a validated record carries make these conversions exact.
    lines = [
        f"{r['request_id']}\t{r['tenant']}\t{r['api_key_prefix']}\t{r['model']}\t"
        f"{r['site']}\t{r['pipeline']}\t{arrival}\t{finish}\t{r['input_tokens']:d}\t"
        f"{r['hit_tokens']:d}\t{r['miss_tokens']:d}\t{r['output_tokens']:d}\t"
        f"{_NULL if r['ttft_s'] is None else repr(r['ttft_s'])}\t"
        f"{_NULL if r['tpot_s'] is None else repr(r['tpot_s'])}\t{r['wan_bytes']:d}\t"
        f"{r['handoff_mode']}\t{r['rld_tokens']:d}\t{r['md_tokens']:d}\t"
        f"{'t' if r['sla_met'] else 'f'}\t{'t' if r['rejected'] else 'f'}\t"
        f"{_NULL if r['config_version'] is None else format(r['config_version'], 'd')}\t{end}"
        for r, arrival, finish in zip(records, arrivals, finishes, strict=True)
    ]
    text = "".join(lines)
    columns = 1 + len(RECORD_FIELDS) + len(tail)
    nulls = sum(r[n] is None for r in records for n in ("ttft_s", "tpot_s", "config_version"))
    nulls += end.count("\\N") * len(records)
    # Every separator, line end and backslash is one this function wrote: nothing to escape.
    if (text.count("\t") != len(records) * (columns - 1) or text.count("\n") != len(records)
            or "\r" in text or text.count("\\") != nulls):  # fmt: skip
        return None
    return text


def usage_write(records: Sequence[Record], tenants: Mapping[str, int]) -> None:
    """Billing usage of the new records that were served (a rejected request is not billed),
    skipping any usage row already there."""
    served = [r for r in records if not r["rejected"]]
    if not served:
        return
    now: datetime = timezone.now()
    if not _postgres():
        UsageRecord.objects.bulk_create([_usage_of(r, tenants[r["tenant"]]) for r in served],
                                        ignore_conflicts=True)  # fmt: skip
        return
    values = {
        "request_id": [r["request_id"] for r in served],
        "tenant": [tenants[r["tenant"]] for r in served],
        "time": [r["finish_time"] for r in served],
        "received_at": [now] * len(served),
    }
    columns = [values.get(n) or [r[n] for r in served] for n in USAGE_FIELDS]
    _unnest_insert(UsageRecord, USAGE_FIELDS, columns, "ON CONFLICT DO NOTHING")


def _usage_of(record: Record, tenant_id: int) -> UsageRecord:
    return UsageRecord(
        request_id=record["request_id"], tenant_id=tenant_id, model=record["model"],
        site=record["site"], pipeline=record["pipeline"], time=record["finish_time"],
        miss_tokens=record["miss_tokens"], hit_tokens=record["hit_tokens"],
        output_tokens=record["output_tokens"], sla_met=record["sla_met"],
        config_version=record["config_version"],
    )  # fmt: skip
