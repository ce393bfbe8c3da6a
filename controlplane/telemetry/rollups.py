"""Rolling request records into windows: sum per cell in memory, then add to the rows.

Each record lands in the window that holds its ``finish_time`` (windows are aligned to the
epoch: a 5 s window starts at a multiple of 5 s) in every scope it belongs to: ``all``, its
entry site, its pipeline (``pool``), its tenant, its model, its tenant and model, and the
cumulative ``site-pipeline`` row behind ``/metrics``. Only additive quantities are stored, so a
batch becomes one delta per finest cell (``cells_of``, staged by ingestion as JSON:
``cells_dump``), any number of staged batches merge into one delta per row (``cells_merge``,
``rollup_deltas``), and the rows are updated in place (``rollups_apply``).

Concurrency: ``rollups_apply`` runs in the flush transaction of ``telemetry.staging``, which
has one flusher at a time. It still locks the rows it needs with ``SELECT ... FOR UPDATE`` and
inserts the missing ones (``ON CONFLICT DO NOTHING``), in one global key order, so it stays
correct beside any other writer; the sums are then written back in one ``executemany``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, models
from django.db.models import Field
from django.utils import timezone

from controlplane.telemetry import sketch
from controlplane.telemetry.models import RollupScope, TelemetryRollup
from pdd_core.metrics import hit_band_index, hit_ratio

WINDOWS: tuple[int, ...] = (5, 60)
CUMULATIVE = 0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WINDOW_NAMES = {5: "5s", 60: "1m"}


def _columns(kind: type[Field]) -> tuple[str, ...]:  # type: ignore[type-arg]
    """``TelemetryRollup``'s columns of one kind, in its order: the model declares each column
    by kind (``_count``, ``_sum``, ``_counts_by``), so a new column is merged without a list
    to update here (``type`` is exact: the BIGINT primary key is not a count)."""
    return tuple(f.name for f in TelemetryRollup._meta.concrete_fields if type(f) is kind)


COUNT_FIELDS = _columns(models.BigIntegerField)
SUM_FIELDS = _columns(models.FloatField)
MAP_FIELDS = _columns(models.JSONField)

RollupKey = tuple[int, str, str, datetime]
# Counts are BIGINT columns: a sum saturates here instead of overflowing the column (records
# are bounded, see ``bounds``, so only the all-time row could ever get near it).
COUNT_MAX = 2**63 - 1


@dataclass
class Delta:
    """What one batch adds to one rollup row."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_FIELDS, 0))
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SUM_FIELDS, 0.0))
    maps: dict[str, dict[str, int]] = field(default_factory=lambda: {f: {} for f in MAP_FIELDS})

    @classmethod
    def of(
        cls,
        records: Sequence[Mapping[str, Any]],
        revenue_of: Callable[[Mapping[str, Any]], float],
    ) -> Delta:
        """What ``records`` add to a row: a field at a time over the served ones (one Python
        loop per field is several times cheaper than a dozen dictionary updates per record)."""
        delta = cls()
        c, s, m = delta.counts, delta.sums, delta.maps
        served = [r for r in records if not r["rejected"]]
        c["requests"] = len(records)
        c["rejected"] = len(records) - len(served)
        if not served:
            return delta
        c["sla_met"] = sum([1 for r in served if r["sla_met"]])
        for name in ("input_tokens", "hit_tokens", "output_tokens", "wan_bytes", "rld_tokens",
                     "md_tokens"):  # fmt: skip
            c[name] = sum([r[name] for r in served])  # ints: the parsers give nothing else
        ratios = [hit_ratio(r["hit_tokens"], r["input_tokens"]) for r in served]
        s["hit_ratio_sum"] = sum(ratios)
        s["revenue"] = sum([revenue_of(r) for r in served])
        m["hit_bands"] = {str(band): n for band, n in Counter(map(hit_band_index, ratios)).items()}
        m["pipelines"] = _counted(r["pipeline"] for r in served)
        m["handoffs"] = _counted(r["handoff_mode"] for r in served if r.get("handoff_mode"))
        for name in ("ttft", "tpot"):
            values = [float(v) for r in served if (v := r.get(f"{name}_s")) is not None]
            c[f"{name}_count"] = len(values)
            s[f"{name}_sum"] = sum(values)
            m[f"{name}_hist"] = sketch.histogram_of(values)
        return delta

    def merge(self, other: Delta) -> None:
        for name, value in other.counts.items():
            self.counts[name] += value
        for name, total in other.sums.items():
            self.sums[name] += total
        for name, counts in other.maps.items():
            sketch.merge(self.maps[name], counts)


def _counted(keys: Iterable[str]) -> dict[str, int]:
    return dict(Counter(keys))


def window_start(when: datetime, window_s: int) -> datetime:
    """The start of the epoch-aligned window of ``window_s`` seconds holding ``when``."""
    if window_s == CUMULATIVE:
        return EPOCH
    seconds = int(when.timestamp()) // window_s * window_s
    return datetime.fromtimestamp(seconds, tz=UTC)


def scopes_of(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (scope, key) pairs of the windowed rollups a record counts in."""
    return [
        (RollupScope.ALL.value, ""),
        (RollupScope.SITE.value, record["site"]),
        (RollupScope.POOL.value, record["pipeline"]),
        (RollupScope.TENANT.value, record["tenant"]),
        (RollupScope.MODEL.value, record["model"]),
        (RollupScope.TENANT_MODEL.value, f"{record['tenant']}/{record['model']}"),
    ]


CellKey = tuple[str, str, str, str, datetime]


def cells_of(
    records: Iterable[Mapping[str, Any]], revenue_of: Callable[[Mapping[str, Any]], float]
) -> dict[CellKey, Delta]:
    """The records summed per finest cell (site, pipeline, tenant, model, 5 s window): what
    ingestion stages (pure: no database). Every longer window is a multiple of the 5 s one, so
    a cell lies in exactly one window of each size and one row of each scope."""
    groups: dict[CellKey, list[Mapping[str, Any]]] = {}
    starts: dict[int, datetime] = {}  # a batch has few distinct seconds: convert each once
    for record in records:
        second = int(record["finish_time"].timestamp())
        start = starts.get(second)
        if start is None:
            start = starts[second] = window_start(record["finish_time"], WINDOWS[0])
        cell = (record["site"], record["pipeline"], record["tenant"], record["model"], start)
        group = groups.get(cell)
        if group is None:
            groups[cell] = [record]
        else:
            group.append(record)
    return {cell: Delta.of(group, revenue_of) for cell, group in groups.items()}


def rollup_deltas(cells: Mapping[CellKey, Delta]) -> dict[RollupKey, Delta]:
    """One delta per rollup row the cells touch: each cell is merged into its dozen rows."""
    deltas: dict[RollupKey, Delta] = {}
    for (site, pipeline, tenant, model, start), cell_delta in cells.items():
        fields = {"site": site, "pipeline": pipeline, "tenant": tenant, "model": model}
        keys: list[RollupKey] = [
            (w, scope, key, window_start(start, w))
            for w in WINDOWS
            for scope, key in scopes_of(fields)
        ]
        keys.append((CUMULATIVE, RollupScope.SITE_PIPELINE.value, f"{site}/{pipeline}", EPOCH))
        for k in keys:
            deltas.setdefault(k, Delta()).merge(cell_delta)
    return deltas


def accumulate(
    records: Iterable[Mapping[str, Any]], revenue_of: Callable[[Mapping[str, Any]], float]
) -> dict[RollupKey, Delta]:
    """One delta per rollup row the records touch (pure: no database)."""
    return rollup_deltas(cells_of(records, revenue_of))


def cells_dump(cells: Mapping[CellKey, Delta]) -> list[dict[str, Any]]:
    """Cells as JSON: ``{"cell": [site, pipeline, tenant, model, start (epoch s)], "counts":
    {...}, "sums": {...}, "maps": {...}}`` keyed by field name, so a process can read what an
    older one staged (a field it lacks counts 0) and refuses a field it does not know instead
    of dropping it. Floats survive the round trip exactly (``json`` writes the shortest repr
    that reads back)."""
    return [
        {"cell": [site, pipeline, tenant, model, int(start.timestamp())],
         "counts": d.counts, "sums": d.sums, "maps": d.maps}
        for (site, pipeline, tenant, model, start), d in cells.items()
    ]  # fmt: skip


def _fields_of(values: Mapping[str, Any], names: tuple[str, ...]) -> None:
    unknown = set(values) - set(names)
    if unknown:
        raise ValueError(f"staged rollup cell: unknown fields {sorted(unknown)}")


def cells_merge(into: dict[CellKey, Delta], dumped: Iterable[Mapping[str, Any]]) -> None:
    """Add cells written by ``cells_dump`` to ``into`` (same cell key: merged)."""
    for cell in dumped:
        site, pipeline, tenant, model, start = cell["cell"]
        for name, names in (("counts", COUNT_FIELDS), ("sums", SUM_FIELDS), ("maps", MAP_FIELDS)):
            _fields_of(cell[name], names)
        delta = Delta()
        delta.counts.update(cell["counts"])
        delta.sums.update(cell["sums"])
        delta.maps.update({n: dict(m) for n, m in cell["maps"].items()})
        key = (site, pipeline, tenant, model, datetime.fromtimestamp(start, tz=UTC))
        if key in into:
            into[key].merge(delta)
        else:
            into[key] = delta


def merge_into(row: TelemetryRollup, delta: Delta) -> None:
    """Add a delta to a row in memory."""
    for name, value in delta.counts.items():
        setattr(row, name, min(getattr(row, name) + value, COUNT_MAX))
    for name, total in delta.sums.items():
        setattr(row, name, getattr(row, name) + total)
    for name, counts in delta.maps.items():
        setattr(row, name, sketch.merge(dict(getattr(row, name)), counts))


def delta_of(row: TelemetryRollup) -> Delta:
    """A row's values as a delta, to merge several rows (e.g. into a longer window)."""
    return Delta(
        counts={n: getattr(row, n) for n in COUNT_FIELDS},
        sums={n: getattr(row, n) for n in SUM_FIELDS},
        maps={n: dict(getattr(row, n)) for n in MAP_FIELDS},
    )


def _locked_rows(keys: Sequence[RollupKey]) -> list[TelemetryRollup]:
    """The rows of ``keys``, locked (``FOR UPDATE`` where the database has it), in key order.

    Raw SQL with a row-value ``IN``: the ORM's OR of a dozen four-field ``Q`` costs more to
    build than the query takes to run."""
    qn, ops = connection.ops.quote_name, connection.ops
    cols = ", ".join(qn(c) for c in ("window_s", "scope", "key", "start"))
    rows = ", ".join(["(%s, %s, %s, %s)"] * len(keys))
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    sql = (f"SELECT * FROM {qn(TelemetryRollup._meta.db_table)} WHERE ({cols}) IN ({rows}) "
           f"ORDER BY {cols}{lock}")  # fmt: skip
    params = [v for w, sc, k, t in keys for v in (w, sc, k, ops.adapt_datetimefield_value(t))]
    return list(TelemetryRollup.objects.raw(sql, params))


def _write_back(rows: Sequence[TelemetryRollup]) -> None:
    """One ``executemany`` UPDATE of every summed column (``bulk_update``'s CASE expressions
    dominate the cost of small batches)."""
    qn = connection.ops.quote_name
    names = [*COUNT_FIELDS, *SUM_FIELDS, *MAP_FIELDS, "updated_at"]
    fields = [f for n in names if isinstance(f := TelemetryRollup._meta.get_field(n), Field)]
    sql = (f"UPDATE {qn(TelemetryRollup._meta.db_table)} SET "
           + ", ".join(f"{qn(f.column)} = %s" for f in fields) + " WHERE id = %s")  # fmt: skip
    now = timezone.now()
    stamp = TelemetryRollup._meta.get_field("updated_at").get_db_prep_save(now, connection)
    # Counts and sums go as the ints and floats they are; the maps through their field (JSON).
    plain = [*COUNT_FIELDS, *SUM_FIELDS]
    maps = [f for f in fields if f.name in MAP_FIELDS]
    params = []
    for row in rows:
        row.updated_at = now
        values = [getattr(row, name) for name in plain]
        values += [f.get_db_prep_save(getattr(row, f.attname), connection) for f in maps]
        params.append([*values, stamp, row.pk])
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def rollups_apply(deltas: Mapping[RollupKey, Delta]) -> list[TelemetryRollup]:
    """Add ``deltas`` to their rows; call inside a transaction. Returns the updated rows."""
    if not deltas:
        return []
    keys = sorted(deltas)
    rows = _locked_rows(keys)
    if len(rows) < len(keys):  # a window's first batch: make its rows, then lock them too
        have = {(r.window_s, r.scope, r.key, r.start) for r in rows}
        TelemetryRollup.objects.bulk_create(
            [TelemetryRollup(window_s=w, scope=s, key=k, start=t)
             for w, s, k, t in keys if (w, s, k, t) not in have],
            ignore_conflicts=True,
        )  # fmt: skip
        rows = _locked_rows(keys)
    for row in rows:
        merge_into(row, deltas[(row.window_s, row.scope, row.key, row.start)])
    _write_back(rows)
    return rows
