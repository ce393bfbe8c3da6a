"""``GET /api/v1/telemetry/summary/``: the latest window and a series, from rollups only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.telemetry.services import records_ingest
from tests import factories
from tests.controlplane.telemetry.conftest import record_at

URL = "/api/v1/telemetry/summary/"
pytestmark = pytest.mark.django_db


@pytest.fixture
def traffic(acme: Any) -> Any:
    dc_a = factories.site(slug="dc-a")
    # 4 one-chip instances on one 8-chip node: $24/h (pdd_core.specs.pool_cost_per_hour)
    factories.pool(site=dc_a, chip=factories.chip(price_per_hour="3.0000"), instance_count=4)
    now = timezone.now().replace(microsecond=0) - timedelta(seconds=10)
    records_ingest(records=[
        record_at(now, request_id="a", ttft_s=0.5),
        record_at(now, request_id="b", ttft_s=0.5, hit_tokens=0, miss_tokens=1000),
        record_at(now, request_id="c", site="dc-b", rejected=True),
    ])  # fmt: skip
    return now


def test_summary_of_all_and_of_a_site(viewer: Any, traffic: Any) -> None:
    everything = viewer.get(URL, {"window": "1m"}).json()
    site = viewer.get(URL, {"window": "1m", "scope": "site:dc-a"}).json()

    latest = everything["latest"]
    assert (latest["requests"], latest["served"], latest["rejected"]) == (3, 2, 1)
    assert latest["hit_request_weighted"] == pytest.approx(0.45)
    assert latest["hit_token_weighted"] == pytest.approx(0.45)
    assert latest["cost_per_hour"] == pytest.approx(24.0)
    assert latest["bcr"] == pytest.approx(2 / 60 / 24.0)
    assert latest["ttft_p90"] == pytest.approx(0.5, rel=0.06)
    assert (site["scope"], site["key"], site["latest"]["requests"]) == ("site", "dc-a", 2)
    assert site["latest"]["cost_per_hour"] == pytest.approx(24.0)
    assert len(everything["series"]) == 1


def test_summary_of_a_scope_without_data_is_empty(viewer: Any, traffic: Any) -> None:
    body = viewer.get(URL, {"scope": "tenant:nobody"}).json()

    assert (body["latest"], body["series"]) == (None, [])


BAD = [
    ({"window": "2h"}, "window"),
    ({"scope": "site"}, "scope"),
    ({"scope": "rack:x"}, "scope"),
    ({"points": "0"}, "points"),
]


@pytest.mark.parametrize("params,field", BAD)
def test_bad_parameters_answer_400(viewer: Any, params: dict[str, str], field: str) -> None:
    response = viewer.get(URL, params)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


@pytest.mark.parametrize("persona,status", [("operator", 200), ("viewer", 200),
    ("billing_client", 403), ("agent", 403), ("outsider", 401), ("anonymous", 401)])  # fmt: skip
def test_who_may_read_the_summary(request: Any, persona: str, status: int) -> None:
    assert request.getfixturevalue(persona).get(URL).status_code == status
