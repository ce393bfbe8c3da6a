"""Dead letters: the records ingestion refused, kept per agent until an operator replays them.

How they reach the control plane: they do not have to travel. Ingestion itself decides each
refusal (``services.records_ingest``), so it stores every refused record as it arrived, with
its errors, the writing agent (the record's ``agent``), the reporting token and its site
(``dead_letters_store``, one statement per batch that had refusals, none for a good batch).
The gateway's shipper still sets them aside in ``<agent>.dead.jsonl`` and counts them in its
heartbeat (``records_rejected``): a local copy, and the figure the topology page shows.

How a replay re-submits them: ``replay.dead_letters_replay`` sends the pending ones back
through ``records_ingest`` as their token reported them (same site checks), in batches.
Ingestion is idempotent by request id, so a replay repeated, or a record the agent also sent
again, counts once; accepted (or already stored) ones are marked ``replayed_at``, the others
stay pending with their new errors.

Counted per agent on the overview and in ``/metrics`` (``dead_letter_counts``), and the
``dead_letters`` SLA metric opens an alert while records are refused (``alerts``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Q
from django.utils import timezone

from controlplane.accounts.models import ApiToken
from controlplane.telemetry.models import DeadLetter

REQUEST_ID_MAX = 128


def _text(value: Any) -> str:
    """JSON text that any column stores (ASCII: a NUL in a record is escaped, not refused)."""
    return json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)


def _short(raw: Mapping[str, Any], name: str, limit: int) -> str:
    value = raw.get(name)
    return value[:limit] if isinstance(value, str) else ""


def _row(raw: Any, errors: Any, token: ApiToken | None, now: datetime) -> DeadLetter:
    fields = raw if isinstance(raw, Mapping) else {}
    request_id = fields.get("request_id")
    key = (request_id if isinstance(request_id, str) and 0 < len(request_id) <= REQUEST_ID_MAX
           else "sha256:" + hashlib.sha256(_text(raw).encode()).hexdigest())  # fmt: skip
    site = token.site.slug if token is not None and token.site is not None else None
    return DeadLetter(
        site=site or _short(fields, "site", 64), key=key, agent=_short(fields, "agent", 100),
        tenant=_short(fields, "tenant", 64), model=_short(fields, "model", 64),
        record=_text(raw), errors=_text(errors), source_token=token, first_seen=now,
        last_seen=now, replayed_at=None,
    )  # fmt: skip


def dead_letters_store(
    records: Sequence[Any], errors: Mapping[int, Any], *, token: ApiToken | None
) -> int:
    """Keep the refused ``records`` (``errors`` by index) as dead letters: a record refused
    again updates its row (new errors, ``last_seen``, pending again). Returns how many."""
    if not errors:
        return 0
    now = timezone.now()
    rows: dict[tuple[str, str], DeadLetter] = {}
    for index, error in errors.items():
        row = _row(records[index], error, token, now)
        rows[(row.site, row.key)] = row  # one row per key: ON CONFLICT updates a row once
    DeadLetter.objects.bulk_create(
        list(rows.values()), update_conflicts=True, unique_fields=["site", "key"],
        update_fields=["agent", "tenant", "model", "record", "errors", "source_token",
                       "last_seen", "replayed_at"],
    )  # fmt: skip
    return len(rows)


@dataclass(frozen=True)
class DeadLetterCount:
    """The dead letters of one agent: waiting for a replay, and all kept."""

    site: str
    agent: str
    pending: int
    total: int
    last_seen: datetime


def dead_letter_counts() -> list[DeadLetterCount]:
    """Dead letters per (site, agent), the agents with pending ones first."""
    rows = (
        DeadLetter.objects.values("site", "agent")
        .annotate(
            pending=Count("id", filter=Q(replayed_at__isnull=True)),
            total=Count("id"),
            last_seen=Max("last_seen"),
        )
        .order_by("-pending", "site", "agent")
    )
    return [DeadLetterCount(**row) for row in rows]


def dead_letters_in(start: datetime, end: datetime, *, tenant: str = "", model: str = "") -> int:
    """How many records were refused (last) in ``[start, end)``, of a tenant and/or model."""
    found = DeadLetter.objects.filter(last_seen__gte=start, last_seen__lt=end)
    if tenant:
        found = found.filter(tenant=tenant)
    if model:
        found = found.filter(model=model)
    return found.count()
