"""Monitoring pages: overview from server JSON, topology, alerts; viewers see no controls and
are refused by the server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone

from controlplane.telemetry.models import SlaRule
from controlplane.telemetry.services import records_ingest
from tests import factories
from tests.controlplane.telemetry.conftest import record_at

pytestmark = pytest.mark.django_db


def test_overview_embeds_the_series_and_loads_plotly_locally(browser_operator: Any) -> None:
    factories.record_world("acme")
    records_ingest(records=[record_at(timezone.now() - timezone.timedelta(seconds=6))])

    response = browser_operator.get("/")

    html = response.content.decode()
    assert response.status_code == 200
    assert '/static/plotly/plotly.min.js"' in html
    data = json.loads(html.split('id="overview-data" type="application/json">')[1].split("<")[0])
    assert [p["requests"] for p in data["series"]] == [1]
    assert data["sla"]["ttft_p99"] == 5.0
    for chart in ("ttft", "hit-bands", "bcr", "wan", "rld", "pipelines"):
        assert f'id="chart-{chart}"' in html


def test_plotly_is_served_by_the_app(browser_operator: Any) -> None:
    response = browser_operator.get("/static/plotly/plotly.min.js")

    assert response.status_code == 200


def test_topology_shows_sites_links_and_no_agents_yet(browser_operator: Any) -> None:
    a, b = factories.site(slug="dc-a"), factories.site(slug="dc-b")
    factories.link(slug="a-b", source=a, target=b, bandwidth_gbps=40.0)
    factories.pool(slug="a-prefill", site=a)

    html = browser_operator.get("/topology/").content.decode()

    assert 'data-link="a-b"' in html and 'data-capacity="40.0"' in html
    assert "a-prefill" in html
    assert "No agents registered yet." in html


def test_operator_creates_a_rule_from_the_alerts_page(browser_operator: Any) -> None:
    response = browser_operator.post("/alerts/", {"slug": "p99", "name": "P99",
        "metric": "ttft_p99", "threshold": "3", "window_s": "60"})  # fmt: skip

    assert response.status_code == 302
    assert SlaRule.objects.get().threshold == 3.0


def test_bad_rule_shows_errors_beside_fields(browser_operator: Any) -> None:
    response = browser_operator.post("/alerts/", {"slug": "", "name": "x", "metric": "ttft_p99",
                                                  "threshold": "-1"})  # fmt: skip

    assert response.status_code == 400
    assert SlaRule.objects.count() == 0
    assert 'class="field invalid"' in response.content.decode()


def test_viewer_sees_no_controls_and_is_refused(viewer_browser: Any) -> None:
    SlaRule.objects.create(slug="keep", name="Keep", metric="ttft_p90", threshold=1.0)

    page = viewer_browser.get("/alerts/").content.decode()
    create = viewer_browser.post("/alerts/", {"slug": "x", "name": "x", "metric": "ttft_p99",
                                              "threshold": "1"})  # fmt: skip
    delete = viewer_browser.post("/alerts/", {"delete": "keep"})

    assert 'id="rule-form"' not in page and 'name="delete"' not in page
    assert (create.status_code, delete.status_code) == (403, 403)
    assert list(SlaRule.objects.values_list("slug", flat=True)) == ["keep"]


@pytest.mark.parametrize("url", ["/", "/topology/", "/alerts/"])
def test_pages_need_login(client: Any, url: str) -> None:
    response = client.get(url)

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
