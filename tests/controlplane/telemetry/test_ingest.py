"""Ingestion of request records: idempotent by request id, per-record errors, agent scope only."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from controlplane.billing.models import UsageRecord
from controlplane.telemetry.models import RequestRecord
from controlplane.telemetry.services import records_ingest
from tests import factories

URL = "/api/v1/telemetry/records/"


def test_agent_posts_batch_and_rows_are_written(agent: Any, acme: Any) -> None:
    batch = [factories.request_record(request_id=f"r{i}") for i in range(3)]

    response = agent.post(URL, {"records": batch}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json() == {"accepted": 3, "duplicates": 0, "errors": {}}
    assert RequestRecord.objects.count() == 3
    usage = UsageRecord.objects.get(request_id="r1")
    assert (usage.tenant, usage.miss_tokens, usage.hit_tokens, usage.output_tokens) == (
        acme,
        100,
        900,
        200,
    )
    assert usage.time.isoformat() == "2025-01-10T12:00:05+00:00"


def test_same_batch_posted_twice_counts_once(agent: Any, acme: Any) -> None:
    batch = [factories.request_record(request_id=f"r{i}") for i in range(5)]

    first = agent.post(URL, {"records": batch}, format="json")
    second = agent.post(URL, {"records": batch}, format="json")

    assert first.json() == {"accepted": 5, "duplicates": 0, "errors": {}}
    assert second.json() == {"accepted": 0, "duplicates": 5, "errors": {}}
    assert RequestRecord.objects.count() == 5
    assert UsageRecord.objects.count() == 5


def test_repeat_inside_one_batch_is_a_duplicate(acme: Any) -> None:
    record = factories.request_record(request_id="same")

    result = records_ingest(records=[record, record])

    assert (result.accepted, result.duplicates, result.errors) == (1, 1, {})


def test_malformed_record_gets_its_own_errors_and_good_ones_are_kept(agent: Any, acme: Any) -> None:
    good = factories.request_record(request_id="good")
    bad_sum = factories.request_record(request_id="bad-sum", input_tokens=999)
    bad_tenant = factories.request_record(request_id="bad-tenant", tenant="nobody")
    bad_pipeline = factories.request_record(request_id="bad-pipe", pipeline="P-X")

    response = agent.post(
        URL, {"records": [good, bad_sum, bad_tenant, bad_pipeline, "nope"]}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["accepted"], body["duplicates"]) == (1, 0)
    assert body["errors"] == {
        "1": {"input_tokens": ["Must equal hit_tokens + miss_tokens."]},
        "2": {"tenant": ["Unknown tenant 'nobody'."]},
        "3": {"pipeline": ['"P-X" is not a valid choice.']},
        "4": {"non_field_errors": ["Each record must be a JSON object."]},
    }
    assert list(RequestRecord.objects.values_list("request_id", flat=True)) == ["good"]


def test_every_record_bad_is_400_in_the_envelope(agent: Any, acme: Any) -> None:
    bad = factories.request_record(
        arrival_time="2025-01-10T12:00:00Z", finish_time="2025-01-10T11:00:00Z"
    )

    response = agent.post(URL, {"records": [bad]}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["fields"] == {
        "records": {"0": {"finish_time": ["Must not be before arrival_time."]}}
    }
    assert RequestRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "records: Expected a non-empty list of records."),
        ({"records": []}, "records: Expected a non-empty list of records."),
        ({"records": {"a": 1}}, "records: Expected a non-empty list of records."),
    ],
)
def test_malformed_body_is_400(agent: Any, body: Any, message: str) -> None:
    response = agent.post(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"] == message


def test_batch_over_the_limit_is_400(agent: Any, acme: Any) -> None:
    batch = [factories.request_record(request_id=f"r{i}") for i in range(1001)]

    response = agent.post(URL, {"records": batch}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "records: At most 1000 records per batch."
    assert RequestRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("persona", "expected"),
    [("operator", 403), ("viewer", 403), ("billing_client", 403), ("outsider", 401),
     ("anonymous", 401)],
)  # fmt: skip
def test_only_agents_may_post(
    request: pytest.FixtureRequest, acme: Any, persona: str, expected: int
) -> None:
    client = request.getfixturevalue(persona)

    response = client.post(URL, {"records": [factories.request_record()]}, format="json")

    assert response.status_code == expected
    assert RequestRecord.objects.count() == 0
    assert UsageRecord.objects.count() == 0


def test_rejected_request_is_recorded_but_not_billed(acme: Any) -> None:
    result = records_ingest(records=[factories.request_record(request_id="rj", rejected=True)])

    assert result.accepted == 1
    assert RequestRecord.objects.filter(request_id="rj").exists()
    assert not UsageRecord.objects.filter(request_id="rj").exists()


def test_reported_key_use_advances_last_used_at(acme: Any) -> None:
    key = acme.api_keys.get()
    records = [
        factories.request_record(api_key_prefix=key.prefix, arrival_time="2025-01-10T12:00:00Z"),
        factories.request_record(api_key_prefix=key.prefix, arrival_time="2025-01-09T12:00:00Z"),
    ]

    records_ingest(records=records)

    key.refresh_from_db()
    assert key.last_used_at is not None
    assert key.last_used_at.isoformat() == "2025-01-10T12:00:00+00:00"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_of_the_same_batch_count_once() -> None:
    factories.record_world("acme")
    batch = [factories.request_record(request_id=f"c{i}") for i in range(200)]
    results: list[Any] = []
    barrier = threading.Barrier(6)

    def post() -> None:
        try:
            barrier.wait()
            results.append(records_ingest(records=batch))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert connection.vendor == "postgresql"
    assert sum(r.accepted for r in results) == 200
    assert sum(r.duplicates for r in results) == 5 * 200
    assert RequestRecord.objects.count() == 200
    assert UsageRecord.objects.count() == 200
