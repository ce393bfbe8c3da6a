"""The one ingestion path for what agents report: request records, and billing usage from them.

``records_ingest`` validates each record on its own (a malformed record gets its own errors and
the good ones are kept), then writes ``RequestRecord`` and ``billing.UsageRecord`` in one
transaction with ``bulk_create(ignore_conflicts=True)`` on the unique request id. Retried or
concurrent posts of the same batch therefore count once: on PostgreSQL the second insert waits
on the unique index for the first transaction and then skips the row. The same transaction adds
the new rows to their rollups (``telemetry.rollups``); once it commits, the changed windows are
pushed to ``/ws/live/`` (``telemetry.live``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from rest_framework.exceptions import ValidationError

from controlplane.accounts.models import ApiToken
from controlplane.billing.models import ApiKey, Tenant, UsageRecord
from controlplane.core.errors import _flatten
from controlplane.telemetry.live import live_publish, rollups_ingest
from controlplane.telemetry.models import RequestRecord
from controlplane.telemetry.validation import RequestRecordInput

MAX_BATCH = 1000


@dataclass(frozen=True)
class IngestResult:
    """How many records were new, how many were already known, and why the others failed."""

    accepted: int
    duplicates: int
    errors: dict[int, dict[str, Any]] = field(default_factory=dict)


def _validate(
    records: Sequence[Any],
) -> tuple[list[tuple[int, dict[str, Any]]], dict[int, dict[str, Any]]]:
    valid: list[tuple[int, dict[str, Any]]] = []
    errors: dict[int, dict[str, Any]] = {}
    # One parser for the whole batch: building a serializer deep-copies its fields, which cost
    # more than the validation itself when done per record.
    parser = RequestRecordInput()
    for index, raw in enumerate(records):
        if not isinstance(raw, Mapping):
            errors[index] = {"non_field_errors": ["Each record must be a JSON object."]}
            continue
        try:
            valid.append((index, dict(parser.run_validation(raw))))
        except ValidationError as exc:
            errors[index] = _flatten(exc.detail)
    return valid, errors


def _check_tenants(
    valid: list[tuple[int, dict[str, Any]]], errors: dict[int, dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Drop records of unknown tenants or of keys of another tenant (per-record errors)."""
    tenants = dict(
        Tenant.objects.filter(slug__in={r["tenant"] for _, r in valid}).values_list("slug", "id")
    )
    prefixes = {r["api_key_prefix"] for _, r in valid if r["api_key_prefix"]}
    key_tenant = dict(ApiKey.objects.filter(prefix__in=prefixes).values_list("prefix", "tenant_id"))
    kept, seen = [], set()
    for index, record in valid:
        tenant_id = tenants.get(record["tenant"])
        prefix = record["api_key_prefix"]
        if tenant_id is None:
            errors[index] = {"tenant": [f"Unknown tenant {record['tenant']!r}."]}
        elif prefix and key_tenant.get(prefix) != tenant_id:
            errors[index] = {"api_key_prefix": [f"No API key {prefix!r} for this tenant."]}
        elif record["request_id"] in seen:
            continue  # repeated inside the batch: a duplicate, counted below
        else:
            seen.add(record["request_id"])
            kept.append(record)
    return kept, tenants


def _check_site(
    valid: list[tuple[int, dict[str, Any]]],
    errors: dict[int, dict[str, Any]],
    token: ApiToken | None,
) -> list[tuple[int, dict[str, Any]]]:
    """A site-bound agent token reports only its own site's records (per-record errors)."""
    if token is None or token.site is None:
        return valid
    site = token.site.slug
    kept = []
    for index, record in valid:
        if record["site"] != site:
            errors[index] = {"site": [f"This agent token reports for site {site!r} only."]}
        else:
            kept.append((index, record))
    return kept


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


def records_ingest(*, records: Sequence[Any], source_token: ApiToken | None = None) -> IngestResult:
    """Store new request records and their billing usage; known request ids are skipped.

    Returns ``IngestResult(accepted, duplicates, errors)`` where ``errors`` maps the index of
    each rejected record in ``records`` to its field errors.
    """
    valid, errors = _validate(records)
    valid = _check_site(valid, errors, source_token)
    kept, tenants = _check_tenants(valid, errors)
    duplicates_in_batch = len(valid) - len(errors.keys() & {i for i, _ in valid}) - len(kept)
    if not kept:
        return IngestResult(accepted=0, duplicates=duplicates_in_batch, errors=errors)
    batch = uuid.uuid4()
    # A stable insertion order keeps two overlapping concurrent batches from deadlocking.
    kept.sort(key=lambda r: r["request_id"])
    with transaction.atomic():
        RequestRecord.objects.bulk_create(
            [RequestRecord(**r, batch=batch, source_token=source_token) for r in kept],
            ignore_conflicts=True,
        )
        # Rows this call inserted carry its batch id; the others were there already.
        inserted = set(
            RequestRecord.objects.filter(batch=batch).values_list("request_id", flat=True)
        )
        new = [r for r in kept if r["request_id"] in inserted]
        UsageRecord.objects.bulk_create(
            [
                UsageRecord(
                    request_id=r["request_id"],
                    tenant_id=tenants[r["tenant"]],
                    model=r["model"],
                    site=r["site"],
                    pipeline=r["pipeline"],
                    time=r["finish_time"],
                    miss_tokens=r["miss_tokens"],
                    hit_tokens=r["hit_tokens"],
                    output_tokens=r["output_tokens"],
                    sla_met=r["sla_met"],
                )
                for r in new
                if not r["rejected"]  # a rejected request served no tokens and is not billed
            ],
            ignore_conflicts=True,
        )
        _touch_api_keys(new)
        # Rollups in the same transaction: they count exactly the rows this call inserted.
        rows = rollups_ingest(new)
        transaction.on_commit(lambda: live_publish(rows))
    return IngestResult(
        accepted=len(new), duplicates=duplicates_in_batch + len(kept) - len(new), errors=errors
    )
