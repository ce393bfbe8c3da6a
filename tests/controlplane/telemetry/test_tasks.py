"""The periodic telemetry jobs: registered in the one beat schedule; pruning keeps what it must."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.billing.models import UsageRecord
from controlplane.telemetry.models import RequestRecord, TelemetryRollup
from controlplane.telemetry.services import records_ingest
from controlplane.telemetry.tasks import telemetry_prune_task
from tests.controlplane.telemetry.conftest import record_at


def test_beat_schedule_names_registered_telemetry_tasks() -> None:
    from controlplane.celery import app

    app.loader.import_default_modules()
    names = {entry["task"] for entry in app.conf.beat_schedule.values()}

    assert {"controlplane.telemetry.tasks.alerts_evaluate_task",
            "controlplane.telemetry.tasks.telemetry_prune_task"} <= names  # fmt: skip
    assert names <= set(app.tasks)


# Two days old: the prune drops that day's partition while the test's transaction still holds
# the records' deferred foreign-key checks (two hours old meets it only after midnight UTC).
@pytest.mark.django_db
@pytest.mark.parametrize("age", [timedelta(hours=2), timedelta(days=2)], ids=["hours", "days"])
def test_prune_drops_old_records_and_windows_but_keeps_counters_and_usage(
    acme: Any, settings: Any, age: timedelta
) -> None:
    settings.TELEMETRY_RETENTION_HOURS = 1
    now = timezone.now()
    records_ingest(records=[record_at(now - age, request_id="old"),
                            record_at(now - timedelta(minutes=5), request_id="new")])  # fmt: skip

    result = telemetry_prune_task()

    assert result["records"] == 1
    assert list(RequestRecord.objects.values_list("request_id", flat=True)) == ["new"]
    assert UsageRecord.objects.count() == 2
    cutoff = now - timedelta(hours=1)
    assert not TelemetryRollup.objects.filter(window_s__gt=0, start__lt=cutoff).exists()
    assert TelemetryRollup.objects.get(window_s=0, key="dc-a/P-RLD-MD").requests == 2


@pytest.mark.django_db
def test_evaluate_alerts_command_runs_once() -> None:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("evaluate_alerts", stdout=out)

    assert out.getvalue().strip() == "opened 0, updated 0, resolved 0"
