"""``usage-records/?format=csv`` streams every record of the filter (not the first page), the
same rows as the JSON list, under WSGI and ASGI alike."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import AsyncClient, Client

from controlplane.accounts.services import api_token_issue
from controlplane.billing.api import exports
from controlplane.billing.models import UsageRecord
from tests import factories

URL = "/api/v1/billing/usage-records/?from=2025-01-01&to=2025-02-01&format=csv"
T0 = datetime(2025, 1, 10, tzinfo=UTC)


def _usage(tenant: Any, n: int, prefix: str) -> None:
    UsageRecord.objects.bulk_create(
        UsageRecord(request_id=f"{prefix}{i}", tenant=tenant, model="model-x", site="dc-a",
                    pipeline="P-MD", time=T0 + timedelta(minutes=i), miss_tokens=i,
                    hit_tokens=2 * i, output_tokens=3, sla_met=i % 2 == 0)
        for i in range(n)
    )  # fmt: skip


@pytest.fixture
def usage(db: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """130 January records of acme (more than a page, in chunks of 7) and 5 of globex."""
    monkeypatch.setattr(exports, "CHUNK_ROWS", 7)
    _usage(factories.tenant(slug="acme"), 130, "a")
    _usage(factories.tenant(slug="globex"), 5, "g")
    token = api_token_issue(name="billing", scope="billing").secret
    return {"Authorization": f"Bearer {token}"}


def _rows(body: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body.decode())))


def test_the_csv_holds_every_record_of_the_filter_in_id_order(usage: dict[str, str]) -> None:
    response = Client().get(URL + "&tenant=acme&page_size=10", headers=usage)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = _rows(b"".join(response.streaming_content))
    assert [r["request_id"] for r in rows] == [f"a{i}" for i in range(130)]
    first_page = Client().get(URL.replace("&format=csv", "&tenant=acme"), headers=usage).json()
    assert len(first_page["results"]) == 50  # the JSON list pages; the export does not
    assert rows[0] == {k: str(v) for k, v in first_page["results"][0].items()} | {
        "config_version": ""
    }


def test_no_record_is_a_header_line(usage: dict[str, str]) -> None:
    response = Client().get(URL.replace("2025-02-01", "2025-01-02"), headers=usage)

    body = b"".join(response.streaming_content)
    assert body.decode().splitlines() == [
        "id,request_id,tenant,model,site,pipeline,time,miss_tokens,hit_tokens,output_tokens,"
        "sla_met,config_version,received_at"
    ]


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_the_same_rows_stream(usage: dict[str, str]) -> None:
    response = await AsyncClient().get(URL, headers=usage)

    assert response.status_code == 200
    body = b"".join([chunk async for chunk in response.streaming_content])
    ids = [r["request_id"] for r in _rows(body)]
    assert ids == [f"a{i}" for i in range(130)] + [f"g{i}" for i in range(5)]
