"""The overview against the active plan: where the live workload sits on its bathtub, which
figures drifted beyond their tolerances, and the one button that plans from the live window."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.planning.drift import live_workload
from controlplane.planning.models import Plan, PlanStatus, WorkloadSource
from controlplane.telemetry.services import records_ingest
from tests import factories
from tests.controlplane.telemetry.conftest import record_at
from tests.frontend.test_plan_pages import DONE_RESULT

pytestmark = pytest.mark.django_db

BATHTUB = {**DONE_RESULT["bathtub"], "points": [
    {"hit_rate": 0.0, "goodput_rps": 1.0, "revenue_per_cost": 1.0, "bcr": 0.01},
    {"hit_rate": 0.98, "goodput_rps": 3.0, "revenue_per_cost": 2.0, "bcr": 0.02},
]}  # fmt: skip


def _plan(rate_rps: float) -> Plan:
    workload = {"requests": 100, "rate_rps": rate_rps, "mean_hit": 0.9,
                "mean_input_tokens": 1000.0, "mean_output_tokens": 200.0}  # fmt: skip
    return Plan.objects.create(
        scenario="small.toml", inputs={}, status=PlanStatus.DONE, version=3, active=True,
        activated_at=timezone.now(),
        result={**DONE_RESULT, "bathtub": BATHTUB, "search": {"workload": workload}},
    )  # fmt: skip


@pytest.fixture
def live() -> None:
    """12 requests over the last two minutes: hit 0.9, 1000 tokens in, 200 out (factories)."""
    factories.record_world("acme")
    now = timezone.now()
    records_ingest(records=[record_at(now - timedelta(seconds=10 * i + 5)) for i in range(12)])


def test_the_overview_marks_the_live_workload_on_the_plans_bathtub(
    browser_operator: Any, live: None
) -> None:
    # the live rate counts from the first 1-minute window with data, so it depends on where
    # the minute boundaries fell: the plan is sized for what this window reads
    measured = live_workload()
    assert measured is not None and measured.rate_rps is not None
    _plan(rate_rps=measured.rate_rps)

    html = browser_operator.get("/").content.decode()

    section = html[html.index('id="plan-drift"') :]
    assert 'id="bathtub-chart"' in section and "live now (hit 90%" in section
    load = float(re.search(r'data-load="([0-9.e-]+)"', section).group(1))  # type: ignore[union-attr]
    # 12 requests in at least a minute against 2.8 req/s served within the SLA at hit 0.9
    assert 0 < load < 12 / 60 / 2.8 + 1e-9
    assert 'id="drift-ok"' in section
    row = r'<tr data-field="(\w+)">.*?<td>(?:<b class="error">)?(within|drifted)'
    verdicts = dict(re.findall(row, section, re.S))
    assert verdicts == {"mean_hit": "within", "rate_rps": "within",
                        "mean_input_tokens": "within", "mean_output_tokens": "within"}  # fmt: skip


def test_a_drifted_rate_is_said_with_the_button_to_plan_again(
    browser_operator: Any, live: None
) -> None:
    _plan(rate_rps=5.0)  # sized for 25x the live rate

    html = browser_operator.get("/").content.decode()

    assert 'id="drift-alert"' in html and "arrival rate (req/s)" in html
    assert 'action="/plans/from-live/"' in html


def test_the_button_plans_from_the_live_window_on_the_active_scenario(
    browser_operator: Any, live: None
) -> None:
    active = _plan(rate_rps=5.0)

    response = browser_operator.post("/plans/from-live/")

    plan = Plan.objects.exclude(pk=active.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/plans/{plan.pk}/"
    assert plan.scenario == "small.toml"
    assert plan.workload is not None and plan.workload.source == WorkloadSource.TELEMETRY
    assert plan.workload.requests == 12


def test_viewers_see_no_button_and_are_refused(viewer_browser: Any, live: None) -> None:
    _plan(rate_rps=5.0)

    assert "plan-from-live" not in viewer_browser.get("/").content.decode()
    assert viewer_browser.post("/plans/from-live/").status_code == 403
    assert Plan.objects.count() == 1
