"""SLA rules evaluated on closed windows; alerts opened, kept and resolved; signed webhooks.

``alerts_evaluate`` is what the periodic Celery task calls. It first flushes the staged rollup
deltas (``staging``), then for each enabled rule it reads the last closed window of the rule's
size in the rule's scope (model and/or tenant, else all) and:

- breach and no open alert: opens one (``first_seen`` = ``last_seen`` = the window's end);
- breach and an open alert: moves ``last_seen``, updates ``value`` and ``worst``;
- no breach and an open alert: resolves it (``resolved_at``);
- no served request in the window: nothing (an idle model is not a breach).

Openings and resolutions are pushed to ``/ws/live/`` and, when the rule has a ``webhook_url``,
POSTed by a task scheduled on commit. The webhook body is JSON; headers
``X-PDD-Timestamp`` (Unix seconds) and ``X-PDD-Signature: sha256=<hex>``, the HMAC-SHA256 with
``TELEMETRY_WEBHOOK_SECRET`` of ``"<timestamp>.<body>"``. Receivers recompute it and refuse
stale timestamps (replays).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.core.dispatch import task_delay
from controlplane.telemetry.dead_letters import dead_letters_in
from controlplane.telemetry.models import (
    Alert,
    AlertMetric,
    AlertState,
    RollupScope,
    SlaRule,
    TelemetryRollup,
)
from controlplane.telemetry.rollups import delta_of, window_start
from controlplane.telemetry.staging import rollups_flush
from controlplane.telemetry.summary import summarize

log = logging.getLogger(__name__)
# The delivery task (``tasks.alert_webhook_send_task``), queued by name: tasks import this module.
WEBHOOK_SEND_TASK = "controlplane.telemetry.tasks.alert_webhook_send_task"


@dataclass(frozen=True)
class Evaluation:
    opened: int = 0
    updated: int = 0
    resolved: int = 0


def rule_scope(rule: SlaRule) -> tuple[str, str]:
    """The rollup scope a rule reads: tenant and model, one of them, or everything."""
    if rule.tenant and rule.model:
        return RollupScope.TENANT_MODEL.value, f"{rule.tenant}/{rule.model}"
    if rule.tenant:
        return RollupScope.TENANT.value, rule.tenant
    if rule.model:
        return RollupScope.MODEL.value, rule.model
    return RollupScope.ALL.value, ""


def rule_value(rule: SlaRule, start: datetime) -> float | None:
    """The rule's metric in the window starting at ``start``; None if nothing was served (dead
    letters have a value in every window: how many records were refused in it)."""
    if rule.metric == AlertMetric.DEAD_LETTERS:
        end = start + timedelta(seconds=rule.window_s)
        return float(dead_letters_in(start, end, tenant=rule.tenant, model=rule.model))
    scope, key = rule_scope(rule)
    row = TelemetryRollup.objects.filter(
        window_s=rule.window_s, scope=scope, key=key, start=start
    ).first()
    if row is None or row.requests - row.rejected == 0:
        return None
    point = summarize(delta_of(row), window_s=row.window_s, start=row.start, scope=scope,
                      key=key, cost_per_hour=None)  # fmt: skip
    value = point[rule.metric]
    return float(value) if value is not None else None


def is_breach(rule: SlaRule, value: float) -> bool:
    return value < rule.threshold if rule.is_floor else value > rule.threshold


def alert_json(alert: Alert) -> dict[str, Any]:
    def iso(t: datetime | None) -> str | None:
        return t.isoformat().replace("+00:00", "Z") if t else None

    return {
        "id": alert.pk, "rule": alert.rule.slug, "name": alert.rule.name,
        "metric": alert.rule.metric, "state": alert.state, "value": alert.value,
        "worst": alert.worst, "threshold": alert.threshold, "first_seen": iso(alert.first_seen),
        "last_seen": iso(alert.last_seen), "resolved_at": iso(alert.resolved_at),
    }  # fmt: skip


def _announce(alert: Alert, event: str) -> None:
    from controlplane.telemetry.live import alert_publish

    payload = {**alert_json(alert), "event": event}
    transaction.on_commit(lambda: alert_publish(payload))
    if alert.rule.webhook_url:
        alert_id = alert.pk

        def send() -> None:
            try:
                task_delay(WEBHOOK_SEND_TASK, alert_id, event)
            except Exception:  # an unreachable receiver must not fail the evaluation
                log.exception("alert webhook for alert %s failed", alert_id)

        transaction.on_commit(send)


def _evaluate_rule(rule: SlaRule, now: datetime) -> str | None:
    start = window_start(now, rule.window_s) - timedelta(seconds=rule.window_s)
    seen = start + timedelta(seconds=rule.window_s)
    value = rule_value(rule, start)
    if value is None:
        return None
    alert = Alert.objects.select_for_update().filter(rule=rule, state=AlertState.OPEN).first()
    if is_breach(rule, value):
        if alert is None:
            alert = Alert.objects.create(rule=rule, first_seen=seen, last_seen=seen, value=value,
                                         worst=value, threshold=rule.threshold)  # fmt: skip
            _announce(alert, "opened")
            return "opened"
        worse = min if rule.is_floor else max
        alert.last_seen = max(alert.last_seen, seen)
        alert.value = value
        alert.worst = worse(alert.worst, value)
        alert.save(update_fields=["last_seen", "value", "worst"])
        return "updated"
    if alert is not None:
        alert.state = AlertState.RESOLVED
        alert.resolved_at = seen
        alert.value = value
        alert.save(update_fields=["state", "resolved_at", "value"])
        _announce(alert, "resolved")
        return "resolved"
    return None


def alerts_evaluate(*, now: datetime | None = None) -> Evaluation:
    """Evaluate every enabled rule on its last closed window (idempotent for one window).

    The staged rollup deltas are flushed first, waiting for a flush under way, so the windows
    read hold every record committed before the call."""
    now = now or timezone.now()
    rollups_flush(wait=True)
    outcome = {"opened": 0, "updated": 0, "resolved": 0}
    for rule in SlaRule.objects.filter(enabled=True):
        with transaction.atomic():
            result = _evaluate_rule(rule, now)
        if result:
            outcome[result] += 1
    return Evaluation(**outcome)


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` of HMAC-SHA256(secret, ``"<timestamp>." + body``)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def webhook_request(alert: Alert, event: str, *, now: float) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one webhook delivery."""
    body = json.dumps({**alert_json(alert), "event": event}, sort_keys=True).encode()
    timestamp = str(int(now))
    secret = str(settings.TELEMETRY_WEBHOOK_SECRET)
    return body, {
        "Content-Type": "application/json",
        "User-Agent": "pdd-controlplane-alerts",
        "X-PDD-Timestamp": timestamp,
        "X-PDD-Signature": webhook_signature(secret, timestamp, body),
    }
