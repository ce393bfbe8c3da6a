"""The one ingestion path for what agents report: request records, and billing usage from them.

``records_ingest`` validates each record on its own (a malformed or implausible record gets its
own errors and the good ones are kept; ``validation``, ``bounds``), makes sure the days'
partitions exist (``partitions``), then in one transaction claims the ``(site, request_id)``
keys and writes ``RequestRecord`` and ``billing.UsageRecord`` in bulk (``writes``). Retried or
concurrent posts of the same batch therefore count once: the second claim of a key waits on the
unique index for the first transaction and then skips it. A known id whose stored record
differs is a conflict, reported as that record's error. The same transaction stages the new
rows' rollup delta; once it commits, the pending deltas are flushed into the rollups and the
changed windows pushed to ``/ws/live/`` (``telemetry.staging``, ``telemetry.live``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.accounts.models import ApiToken
from controlplane.billing.models import ApiKey
from controlplane.billing.selectors import HeldKey, held_keys
from controlplane.inventory.selectors import model_specs
from controlplane.telemetry.bounds import (
    RecordLimits,
    record_bound_errors,
    time_bounds_at,
    within_bounds,
)
from controlplane.telemetry.dead_letters import dead_letters_store
from controlplane.telemetry.integrations import site_gateways
from controlplane.telemetry.models import RequestKey, RequestRecord
from controlplane.telemetry.partitions import day_of, partitions_ensure
from controlplane.telemetry.staging import rollups_flush_after_ingest, rollups_stage
from controlplane.telemetry.validation import records_parse
from controlplane.telemetry.writes import RECORD_FIELDS, keys_claim, records_write, usage_write
from controlplane.tenancy.models import Tenant

MAX_BATCH = 1000


@dataclass(frozen=True)
class IngestResult:
    """How many records were new, how many were already known, and why the others failed."""

    accepted: int
    duplicates: int
    errors: dict[int, dict[str, Any]] = field(default_factory=dict)


Indexed = list[tuple[int, dict[str, Any]]]
CONFLICT = "Conflicts with a different record already reported under this request id."
NO_KEY = (
    "Required: the prefix of the gateway key the request was served under (it decides whom "
    "the request bills)."
)
UNKNOWN_MODEL = "Unknown model {model!r}: add it to the inventory, then replay the record."


def _identity(record: dict[str, Any]) -> tuple[str, str]:
    return record["site"], record["request_id"]


def _check_bounds(valid: Indexed, errors: dict[int, dict[str, Any]]) -> Indexed:
    """Refuse records of models the inventory does not know (nothing could price or bound
    them) and records that no real request of their model could produce (``bounds``)."""
    specs = model_specs({r["model"] for _, r in valid})
    limits = {slug: RecordLimits.of(spec) for slug, spec in specs.items()}
    times = time_bounds_at(timezone.now())
    kept = []
    for index, record in valid:
        bounds = limits.get(record["model"])
        if bounds is None:
            errors[index] = {"model": [UNKNOWN_MODEL.format(model=record["model"])]}
        elif within_bounds(record, bounds, times):
            kept.append((index, record))
        else:
            errors[index] = record_bound_errors(record, bounds, times)
    return kept


def _key_error(record: dict[str, Any], key: HeldKey | None, tenant_id: int) -> dict[str, Any]:
    """Why ``record`` may not bill its tenant under its key (empty when it may)."""
    prefix = record["api_key_prefix"]
    if not prefix:
        return {"api_key_prefix": [NO_KEY]}
    if key is None or key.tenant_id != tenant_id:
        return {"api_key_prefix": [f"No API key {prefix!r} for this tenant."]}
    if not key.tenant_active:
        return {"tenant": [f"Tenant {record['tenant']!r} is inactive: no gateway holds its keys."]}
    grace = timedelta(seconds=settings.TELEMETRY_CLOCK_SKEW_S)
    if not key.held_at(record["arrival_time"], grace=grace):
        message = (f"Key {prefix!r} was not on the gateways when the request arrived (not yet "
                   "issued, or revoked or expired by then).")  # fmt: skip
        return {"api_key_prefix": [message]}
    return {}


def _check_tenants(
    valid: Indexed, errors: dict[int, dict[str, Any]]
) -> tuple[Indexed, int, dict[str, int]]:
    """Keep records billable to their tenant: the key they name decides it, and it must have
    been on the gateways when the request arrived (``billing.selectors.HeldKey``). Others get
    per-record errors; repeats inside the batch count as duplicates (a conflict when they
    differ)."""
    tenants = dict(
        Tenant.objects.filter(slug__in={r["tenant"] for _, r in valid}).values_list("slug", "id")
    )
    keys = held_keys({r["api_key_prefix"] for _, r in valid if r["api_key_prefix"]})
    kept: Indexed = []
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    repeats = 0
    for index, record in valid:
        tenant_id = tenants.get(record["tenant"])
        identity = _identity(record)
        first = seen.get(identity)
        if tenant_id is None:
            errors[index] = {"tenant": [f"Unknown tenant {record['tenant']!r}."]}
        elif refused := _key_error(record, keys.get(record["api_key_prefix"]), tenant_id):
            errors[index] = refused
        elif first is not None and first != record:
            errors[index] = {"request_id": [CONFLICT]}
        elif first is not None:
            repeats += 1
        else:
            seen[identity] = record
            kept.append((index, record))
    return kept, repeats, tenants


def _check_source(
    valid: Indexed, errors: dict[int, dict[str, Any]], token: ApiToken | None
) -> Indexed:
    """An agent token reports only its own site's records, each written by a gateway agent
    registered in that site (per-record errors): usage comes from gateways only."""
    if token is None:
        return valid
    site = token.site.slug if token.site is not None else None
    gateways = site_gateways(site) if site is not None else frozenset()
    kept = []
    for index, record in valid:
        if record["site"] != site:
            errors[index] = {"site": [f"This agent token reports for site {site!r} only."]}
        elif record["agent"] not in gateways:
            errors[index] = {"agent": [
                f"Records are accepted only from a gateway agent registered in site {site!r}"
                f"; {record['agent']!r} is not one."]}  # fmt: skip
        else:
            kept.append((index, record))
    return kept


def _conflicting(repeated: Indexed) -> set[int]:
    """Indexes of ``repeated`` records whose stored row under the same id differs."""
    if not repeated:
        return set()
    sites = {r["site"] for _, r in repeated}
    ids = {r["request_id"] for _, r in repeated}
    # The stored records' finish times (their keys hold them) lead the records' index.
    times = RequestKey.objects.filter(site__in=sites, request_id__in=ids).values_list(
        "finish_time", flat=True
    )
    stored = {
        (row["site"], row["request_id"]): row
        for row in RequestRecord.objects.filter(
            finish_time__in=set(times), site__in=sites, request_id__in=ids
        ).values(*dict.fromkeys(("site", "request_id", *RECORD_FIELDS)))
    }
    conflicts = set()
    for index, record in repeated:
        row = stored.get(_identity(record))
        if row is None or any(row[name] != record[name] for name in RECORD_FIELDS):
            conflicts.add(index)
    return conflicts


def _touch_api_keys(records: list[dict[str, Any]]) -> None:
    """Advance each key's last_used_at to its latest reported arrival (never backwards).

    Keys are updated in prefix order: two concurrent batches naming the same keys then lock
    their rows in the same order and cannot deadlock (the records' order, by site and request
    id, puts the keys in a different order in each batch)."""
    latest: dict[str, datetime] = {}
    for r in records:
        prefix = r["api_key_prefix"]
        if prefix and (prefix not in latest or r["arrival_time"] > latest[prefix]):
            latest[prefix] = r["arrival_time"]
    for prefix, when in sorted(latest.items()):
        ApiKey.objects.filter(prefix=prefix).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=when)
        ).update(last_used_at=when)


def records_ingest(*, records: Sequence[Any], source_token: ApiToken | None = None) -> IngestResult:
    """Store new request records and their billing usage; known request ids are skipped.

    Returns ``IngestResult(accepted, duplicates, errors)`` where ``errors`` maps the index of
    each rejected record in ``records`` to its field errors; each is kept as a dead letter
    (``dead_letters``). ``source_token`` is the reporting agent's token: it may report only its
    own site's records.
    """
    valid, errors = records_parse(records)
    valid = _check_source(valid, errors, source_token)
    valid = _check_bounds(valid, errors)
    kept, repeats, tenants = _check_tenants(valid, errors)
    if not kept:
        dead_letters_store(records, errors, token=source_token)
        return IngestResult(accepted=0, duplicates=repeats, errors=errors)
    # A stable insertion order keeps two overlapping concurrent batches from deadlocking.
    kept.sort(key=lambda pair: _identity(pair[1]))
    partitions_ensure({day_of(r["finish_time"]) for _, r in kept})
    with transaction.atomic():
        claimed = keys_claim([r for _, r in kept])
        new, repeated = [], []
        for index, record in kept:
            if _identity(record) in claimed:
                new.append(record)
            else:
                repeated.append((index, record))
        conflicts = _conflicting(repeated)
        records_write(new, batch=uuid.uuid4(), source_token=source_token)
        usage_write(new, tenants)
        _touch_api_keys(new)
        # Staged in the same transaction: the delta counts exactly the rows this call inserted.
        rollups_stage(new)
    if new:
        rollups_flush_after_ingest()
    for index in conflicts:
        errors[index] = {"request_id": [CONFLICT]}
    dead_letters_store(records, errors, token=source_token)
    duplicates = repeats + len(kept) - len(new) - len(conflicts)
    return IngestResult(accepted=len(new), duplicates=duplicates, errors=errors)
