"""The one ingestion path for what agents report: request records, and billing usage from them.

``records_ingest`` validates each record on its own (a malformed or implausible record gets its
own errors and the good ones are kept), then writes ``RequestRecord`` and ``billing.UsageRecord``
in one transaction with ``bulk_create(ignore_conflicts=True)`` on the unique ``(site,
request_id)``. Retried or concurrent posts of the same batch therefore count once: on PostgreSQL
the second insert waits on the unique index for the first transaction and then skips the row. A
known id whose stored record differs is a conflict, reported as that record's error. The same
transaction adds the new rows to their rollups (``telemetry.rollups``); once it commits, the
changed windows are pushed to ``/ws/live/`` (``telemetry.live``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.accounts.models import ApiToken
from controlplane.billing.models import ApiKey, Tenant, UsageRecord
from controlplane.inventory.selectors import model_specs
from controlplane.telemetry.bounds import RecordLimits, record_bound_errors, unknown_model_limits
from controlplane.telemetry.live import live_publish, rollups_ingest
from controlplane.telemetry.models import RequestRecord
from controlplane.telemetry.validation import records_parse

MAX_BATCH = 1000


@dataclass(frozen=True)
class IngestResult:
    """How many records were new, how many were already known, and why the others failed."""

    accepted: int
    duplicates: int
    errors: dict[int, dict[str, Any]] = field(default_factory=dict)


Indexed = list[tuple[int, dict[str, Any]]]
# Every field a stored record keeps from its report: a repeat must match them all.
RECORD_FIELDS = (
    "tenant", "api_key_prefix", "model", "pipeline", "arrival_time", "finish_time",
    "input_tokens", "hit_tokens", "miss_tokens", "output_tokens", "ttft_s", "tpot_s",
    "wan_bytes", "handoff_mode", "rld_tokens", "md_tokens", "sla_met", "rejected",
)  # fmt: skip
CONFLICT = "Conflicts with a different record already reported under this request id."


def _identity(record: dict[str, Any]) -> tuple[str, str]:
    return record["site"], record["request_id"]


def _check_bounds(valid: Indexed, errors: dict[int, dict[str, Any]]) -> Indexed:
    """Refuse records that no real request of their model could produce (``bounds``)."""
    specs = model_specs({r["model"] for _, r in valid})
    limits = {slug: RecordLimits.of(spec) for slug, spec in specs.items()}
    fallback = unknown_model_limits()
    now = timezone.now()
    kept = []
    for index, record in valid:
        problems = record_bound_errors(record, limits.get(record["model"], fallback), now)
        if problems:
            errors[index] = problems
        else:
            kept.append((index, record))
    return kept


def _check_tenants(
    valid: Indexed, errors: dict[int, dict[str, Any]]
) -> tuple[Indexed, int, dict[str, int]]:
    """Drop records of unknown tenants or of keys of another tenant (per-record errors), and
    repeats inside the batch (counted as duplicates, or a conflict when they differ)."""
    tenants = dict(
        Tenant.objects.filter(slug__in={r["tenant"] for _, r in valid}).values_list("slug", "id")
    )
    prefixes = {r["api_key_prefix"] for _, r in valid if r["api_key_prefix"]}
    key_tenant = dict(ApiKey.objects.filter(prefix__in=prefixes).values_list("prefix", "tenant_id"))
    kept: Indexed = []
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    repeats = 0
    for index, record in valid:
        tenant_id = tenants.get(record["tenant"])
        prefix = record["api_key_prefix"]
        first = seen.get(_identity(record))
        if tenant_id is None:
            errors[index] = {"tenant": [f"Unknown tenant {record['tenant']!r}."]}
        elif prefix and key_tenant.get(prefix) != tenant_id:
            errors[index] = {"api_key_prefix": [f"No API key {prefix!r} for this tenant."]}
        elif first is not None and first != record:
            errors[index] = {"request_id": [CONFLICT]}
        elif first is not None:
            repeats += 1
        else:
            seen[_identity(record)] = record
            kept.append((index, record))
    return kept, repeats, tenants


def _check_site(
    valid: Indexed, errors: dict[int, dict[str, Any]], token: ApiToken | None
) -> Indexed:
    """An agent token reports only its own site's records (per-record errors)."""
    if token is None:
        return valid
    site = token.site.slug if token.site is not None else None
    kept = []
    for index, record in valid:
        if record["site"] != site:
            errors[index] = {"site": [f"This agent token reports for site {site!r} only."]}
        else:
            kept.append((index, record))
    return kept


def _conflicting(repeated: Indexed) -> set[int]:
    """Indexes of ``repeated`` records whose stored row under the same id differs."""
    if not repeated:
        return set()
    stored = {
        (row["site"], row["request_id"]): row
        for row in RequestRecord.objects.filter(
            site__in={r["site"] for _, r in repeated},
            request_id__in={r["request_id"] for _, r in repeated},
        ).values("site", "request_id", *RECORD_FIELDS)
    }
    conflicts = set()
    for index, record in repeated:
        row = stored.get(_identity(record))
        if row is None or any(row[name] != record[name] for name in RECORD_FIELDS):
            conflicts.add(index)
    return conflicts


def _touch_api_keys(records: list[dict[str, Any]]) -> None:
    """Advance each key's last_used_at to its latest reported arrival (never backwards)."""
    latest: dict[str, datetime] = {}
    for r in records:
        prefix = r["api_key_prefix"]
        if prefix and (prefix not in latest or r["arrival_time"] > latest[prefix]):
            latest[prefix] = r["arrival_time"]
    for prefix, when in latest.items():
        ApiKey.objects.filter(prefix=prefix).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=when)
        ).update(last_used_at=when)


def _usage_of(record: dict[str, Any], tenant_id: int) -> UsageRecord:
    return UsageRecord(
        request_id=record["request_id"], tenant_id=tenant_id, model=record["model"],
        site=record["site"], pipeline=record["pipeline"], time=record["finish_time"],
        miss_tokens=record["miss_tokens"], hit_tokens=record["hit_tokens"],
        output_tokens=record["output_tokens"], sla_met=record["sla_met"],
    )  # fmt: skip


def records_ingest(*, records: Sequence[Any], source_token: ApiToken | None = None) -> IngestResult:
    """Store new request records and their billing usage; known request ids are skipped.

    Returns ``IngestResult(accepted, duplicates, errors)`` where ``errors`` maps the index of
    each rejected record in ``records`` to its field errors. ``source_token`` is the reporting
    agent's token: it may report only its own site's records.
    """
    valid, errors = records_parse(records)
    valid = _check_site(valid, errors, source_token)
    valid = _check_bounds(valid, errors)
    kept, repeats, tenants = _check_tenants(valid, errors)
    if not kept:
        return IngestResult(accepted=0, duplicates=repeats, errors=errors)
    batch = uuid.uuid4()
    # A stable insertion order keeps two overlapping concurrent batches from deadlocking.
    kept.sort(key=lambda pair: _identity(pair[1]))
    with transaction.atomic():
        RequestRecord.objects.bulk_create(
            [RequestRecord(**r, batch=batch, source_token=source_token) for _, r in kept],
            ignore_conflicts=True,
        )
        # Rows this call inserted carry its batch id; the others were there already.
        inserted = set(RequestRecord.objects.filter(batch=batch).values_list("site", "request_id"))
        new = [r for _, r in kept if _identity(r) in inserted]
        conflicts = _conflicting([(i, r) for i, r in kept if _identity(r) not in inserted])
        UsageRecord.objects.bulk_create(
            # a rejected request served no tokens and is not billed
            [_usage_of(r, tenants[r["tenant"]]) for r in new if not r["rejected"]],
            ignore_conflicts=True,
        )
        _touch_api_keys(new)
        # Rollups in the same transaction: they count exactly the rows this call inserted.
        rows = rollups_ingest(new)
        transaction.on_commit(lambda: live_publish(rows))
    for index in conflicts:
        errors[index] = {"request_id": [CONFLICT]}
    duplicates = repeats + len(kept) - len(new) - len(conflicts)
    return IngestResult(accepted=len(new), duplicates=duplicates, errors=errors)
