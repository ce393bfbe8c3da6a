"""Usage and invoices grouped by the config version that routed each request: billing sees,
on one invoice, the requests served before a plan was activated and after it."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.billing.models import UsageRecord
from controlplane.telemetry.models import RequestRecord
from controlplane.telemetry.services import records_ingest
from tests import factories


@pytest.fixture
def versions(world: Any) -> dict[str, Any]:
    """``world``'s January usage of acme (no version: routed by the gateway's file) plus two
    requests under config version 1 and one under version 2."""
    batch = [
        factories.request_record(request_id="v1a", finish_time="2025-01-20T10:00:00Z",
                                 config_version=1),
        factories.request_record(request_id="v1b", finish_time="2025-01-20T11:00:00Z",
                                 config_version=1, hit_tokens=0, miss_tokens=1000),
        factories.request_record(request_id="v2a", finish_time="2025-01-21T10:00:00Z",
                                 config_version=2),
    ]  # fmt: skip
    assert records_ingest(records=batch).accepted == 3
    return world


def test_the_record_and_its_usage_keep_the_config_version(versions: Any) -> None:
    assert RequestRecord.objects.get(request_id="v1b").config_version == 1
    assert UsageRecord.objects.get(request_id="v2a").config_version == 2
    assert UsageRecord.objects.get(request_id="a1").config_version is None


def test_usage_groups_by_config_version(billing_client: Any, versions: Any) -> None:
    response = billing_client.get(
        "/api/v1/billing/usage/?tenant=acme&from=2025-01-01&to=2025-02-01&group_by=config_version"
    )

    assert response.status_code == 200, response.json()
    rows = response.json()["results"]
    assert [(r["config_version"], r["requests"], r["miss_tokens"]) for r in rows] == [
        (None, 3, 1200),
        (1, 2, 1100),
        (2, 1, 100),
    ]


def test_invoice_has_a_line_per_config_version(billing_client: Any, versions: Any) -> None:
    body = billing_client.get("/api/v1/billing/invoices/acme/2025-01/").json()

    lines = [(x["config_version"], x["requests"], x["amount"]) for x in body["lines"]]
    # per million: v1 1100 miss x 2.00 + 900 hit x 0.40 + 400 out x 8.00; v2 100, 900, 200
    assert lines == [(None, 3, "0.007920"), (1, 2, "0.005760"), (2, 1, "0.002160")]
    assert body["total"] == "0.015840"
    assert body["sla"]["model-x"]["requests"] == 6


def test_a_repeat_with_another_config_version_is_a_conflict(versions: Any) -> None:
    again = factories.request_record(
        request_id="v1a", finish_time="2025-01-20T10:00:00Z", config_version=2
    )

    result = records_ingest(records=[again])

    assert result.accepted == 0
    assert list(result.errors) == [0]
    assert UsageRecord.objects.get(request_id="v1a").config_version == 1


def test_a_negative_config_version_is_refused(versions: Any) -> None:
    bad = factories.request_record(request_id="neg", config_version=-1)

    result = records_ingest(records=[bad])

    assert result.accepted == 0
    assert "config_version" in result.errors[0]
