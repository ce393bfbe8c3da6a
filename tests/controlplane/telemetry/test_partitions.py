"""Daily partitions of the records on PostgreSQL, and the request keys that keep ids unique."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from controlplane.billing.models import UsageRecord
from controlplane.telemetry.models import RequestKey, RequestRecord
from controlplane.telemetry.partitions import partition_days, partition_name
from controlplane.telemetry.services import records_ingest
from controlplane.telemetry.tasks import telemetry_prune_task
from tests import factories
from tests.controlplane.telemetry.conftest import record_at

pytestmark = [pytest.mark.postgres]


def partition_of(request_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tableoid::regclass::text FROM {RequestRecord._meta.db_table} "
            "WHERE request_id = %s", [request_id],
        )  # fmt: skip
        return str(cursor.fetchone()[0])


def test_a_record_of_an_unseen_day_gets_its_partition(acme: Any) -> None:
    when = timezone.now() - timedelta(days=20)
    assert when.date() not in partition_days()

    result = records_ingest(records=[record_at(when, request_id="late")])

    assert result.accepted == 1
    assert when.date() in partition_days()
    assert partition_of("late") == partition_name(when.date())


def test_the_migration_made_partitions_ahead(db: Any) -> None:
    today = timezone.now().date()

    assert {today, today + timedelta(days=1), today + timedelta(days=2)} <= set(partition_days())


def test_a_retried_record_counts_once_across_partitions_and_keys(acme: Any) -> None:
    records = [record_at(timezone.now() - timedelta(days=d), request_id=f"k{d}") for d in range(3)]

    first = records_ingest(records=records)
    second = records_ingest(records=records)

    assert (first.accepted, second.accepted, second.duplicates) == (3, 0, 3)
    assert RequestRecord.objects.count() == RequestKey.objects.count() == 3
    assert UsageRecord.objects.count() == 3


def test_the_same_id_with_another_finish_day_is_a_conflict(acme: Any) -> None:
    now = timezone.now()
    records_ingest(records=[record_at(now, request_id="same")])

    result = records_ingest(records=[record_at(now - timedelta(days=3), request_id="same")])

    assert result.accepted == 0
    assert list(result.errors[0]) == ["request_id"]
    assert RequestRecord.objects.count() == 1


# Transactional: the prune task runs in its own transaction, after ingestion committed (a
# partition cannot be dropped with the ingesting transaction's deferred FK checks pending).
@pytest.mark.django_db(transaction=True)
def test_retention_drops_whole_days_and_deletes_the_rest(settings: Any) -> None:
    factories.record_world("acme")
    settings.TELEMETRY_RETENTION_HOURS = 48
    now = timezone.now()
    old_day: date = (now - timedelta(days=5)).date()
    records_ingest(records=[record_at(now - timedelta(days=5), request_id=f"old{i}")
                            for i in range(3)]
                   + [record_at(now - timedelta(hours=1), request_id="new")])  # fmt: skip

    result = telemetry_prune_task()

    assert old_day not in partition_days()
    assert result["partitions_dropped"] >= 1
    assert result["records"] == 3
    assert list(RequestRecord.objects.values_list("request_id", flat=True)) == ["new"]
    assert list(RequestKey.objects.values_list("request_id", flat=True)) == ["new"]
    assert UsageRecord.objects.count() == 4
