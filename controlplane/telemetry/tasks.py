"""Periodic and deferred telemetry jobs (scheduled in ``controlplane.celery``)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from controlplane.telemetry.alerts import WEBHOOK_SEND_TASK, alerts_evaluate, webhook_request
from controlplane.telemetry.models import (
    Alert,
    DeadLetter,
    RequestKey,
    RequestRecord,
    TelemetryRollup,
)
from controlplane.telemetry.partitions import day_of, partitions_ahead, partitions_drop_before
from controlplane.telemetry.rollups import CUMULATIVE
from controlplane.telemetry.staging import rollups_flush

WEBHOOK_TIMEOUT_S = 5


@shared_task
def alerts_evaluate_task() -> dict[str, int]:
    """Evaluate the SLA rules on the last closed windows (every 5 s from beat)."""
    result = alerts_evaluate()
    return {"opened": result.opened, "updated": result.updated, "resolved": result.resolved}


@shared_task
def rollups_flush_task() -> int:
    """Flush rollup deltas that no ingestion call flushed (its process died after the commit,
    or the flusher ran out of rounds under load); every ``staging.FLUSH_INTERVAL_S`` from beat.
    Returns how many records the flushed deltas counted."""
    return rollups_flush()


@shared_task
def telemetry_prune_task() -> dict[str, int]:
    """Delete records (and their keys) and windowed rollups older than
    ``TELEMETRY_RETENTION_HOURS``; the cumulative counters behind /metrics and billing's usage
    records stay. On PostgreSQL whole days go by dropping their partition, and the partitions
    of the next days are made ahead (``partitions``)."""
    now = timezone.now()
    cutoff = now - timedelta(hours=int(settings.TELEMETRY_RETENTION_HOURS))
    dropped, in_dropped = partitions_drop_before(cutoff)
    records, _ = RequestRecord.objects.filter(finish_time__lt=cutoff).delete()
    records += in_dropped
    keys, _ = RequestKey.objects.filter(finish_time__lt=cutoff).delete()
    rollups, _ = (
        TelemetryRollup.objects.exclude(window_s=CUMULATIVE).filter(start__lt=cutoff).delete()
    )
    created = partitions_ahead(day_of(now))
    # Dead letters: replayed ones go with the records; pending ones once no replay could
    # ingest them (older than the oldest arrival ingestion accepts).
    too_old = now - timedelta(days=int(settings.TELEMETRY_MAX_RECORD_AGE_DAYS))
    letters, _ = DeadLetter.objects.filter(
        Q(replayed_at__lt=cutoff) | Q(replayed_at__isnull=True, last_seen__lt=too_old)
    ).delete()
    return {"records": records, "keys": keys, "rollups": rollups, "dead_letters": letters,
            "partitions_dropped": len(dropped), "partitions_created": len(created)}  # fmt: skip


@shared_task(
    name=WEBHOOK_SEND_TASK,
    bind=True,
    autoretry_for=(urllib.error.URLError, TimeoutError, ConnectionError),
    retry_backoff=True,
    max_retries=3,
)
def alert_webhook_send_task(self: Any, alert_id: int, event: str) -> int:
    """POST one alert event to its rule's webhook; retried on network errors, 3 times."""
    alert = Alert.objects.select_related("rule").filter(pk=alert_id).first()
    if alert is None or not alert.rule.webhook_url:
        return 0
    body, headers = webhook_request(alert, event, now=time.time())
    request = urllib.request.Request(alert.rule.webhook_url, data=body, headers=headers,
                                     method="POST")  # fmt: skip
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:
        return int(response.status)
