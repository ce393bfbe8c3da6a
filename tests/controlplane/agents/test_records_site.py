"""A site-bound agent token reports only its own site's records; the good ones are kept."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.billing.models import Tenant
from controlplane.telemetry.models import RequestRecord

pytestmark = pytest.mark.django_db


def record(request_id: str, site: str) -> dict[str, Any]:
    return {
        "request_id": request_id, "tenant": "acme", "model": "deepseek-v3", "site": site,
        "pipeline": "P-MD", "arrival_time": "2026-11-02T10:00:00Z",
        "finish_time": "2026-11-02T10:00:03Z", "input_tokens": 1000, "hit_tokens": 900,
        "miss_tokens": 100, "output_tokens": 50, "ttft_s": 0.4, "tpot_s": 0.02, "sla_met": True,
    }  # fmt: skip


def test_records_of_another_site_are_refused_one_by_one(agent_a: APIClient, site_b: Any) -> None:
    Tenant.objects.create(slug="acme", name="Acme")
    body = {"records": [record("r-1", "dc-a"), record("r-2", "dc-b"), record("r-3", "dc-a")]}

    response = agent_a.post("/api/v1/telemetry/records/", body, format="json")

    assert response.status_code == 200
    assert response.json() == {
        "accepted": 2,
        "duplicates": 0,
        "errors": {"1": {"site": ["This agent token reports for site 'dc-a' only."]}},
    }
    assert set(RequestRecord.objects.values_list("request_id", flat=True)) == {"r-1", "r-3"}


def test_a_batch_only_of_another_site_gets_400_and_stores_nothing(
    agent_a: APIClient, site_b: Any
) -> None:
    Tenant.objects.create(slug="acme", name="Acme")

    response = agent_a.post(
        "/api/v1/telemetry/records/", {"records": [record("r-1", "dc-b")]}, format="json"
    )

    assert response.status_code == 400
    assert RequestRecord.objects.count() == 0


def test_an_agent_token_reports_its_own_site_only_whatever_it_claims(
    agent_a: APIClient, site_b: Any
) -> None:
    Tenant.objects.create(slug="acme", name="Acme")

    response = agent_a.post(
        "/api/v1/telemetry/records/",
        {"records": [record("r-1", "dc-b"), record("r-2", "dc-b")]},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["records"] == {
        "0": {"site": ["This agent token reports for site 'dc-a' only."]},
        "1": {"site": ["This agent token reports for site 'dc-a' only."]},
    }
    assert RequestRecord.objects.count() == 0
