"""Plan pages without a browser: operators request and activate; viewers only look."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.planning.models import Plan, PlanStatus
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

DONE_RESULT = {
    "feasible": True,
    "model": "m",
    "pools": [{"site": "a", "chip": "c", "role": "P", "instances": 1, "tp": 1, "chips": 1,
               "cost_per_hour": 1.0, "reason": "r"}],
    "routing_table": {"transfer_budget_s": 0.5},
    "predicted": {"bcr": 0.01, "sla_met": True},
    "baseline": {"found": False, "cost_table": []},
    "bathtub": {
        "points": [{"hit_rate": 0.5, "revenue_per_cost": 1.0, "resized_revenue_per_cost": None,
                    "bcr": 0.01}],
        "valley_index": 0,
        "valley": {"hit_rate": 0.5, "revenue_per_cost": 1.0, "resized_revenue_per_cost": None},
        "current": {"hit_rate": 0.5, "revenue_per_cost": 1.0},
    },
    "reasons": {"summary": "binding: x", "pools": ["p"], "routing": ["r"], "comparison": "c"},
}  # fmt: skip


@pytest.fixture(autouse=True)
def eager_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    from controlplane.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def _done_plan() -> Plan:
    return Plan.objects.create(
        scenario="small.toml", inputs={}, status=PlanStatus.DONE, result=DONE_RESULT, progress=100
    )


def test_operator_sees_the_form_and_the_activate_button(browser_operator: Client) -> None:
    plan = _done_plan()
    listing = browser_operator.get("/plans/").content.decode()
    assert 'id="plan-create"' in listing
    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()
    assert 'id="activate"' in page
    assert 'id="bathtub-figure"' in page
    assert "plotly/plotly.min.js" in page


def test_operator_requests_a_plan_through_the_form(browser_operator: Client) -> None:
    response = browser_operator.post("/plans/", {"scenario": "small.toml"})
    plan = factories.plan_finished(Plan.objects.get().pk)
    assert response.status_code == 302
    assert response["Location"] == f"/plans/{plan.pk}/"
    assert plan.status == PlanStatus.DONE
    assert plan.requested_by == "ops"


def test_operator_activates_through_the_page(browser_operator: Client) -> None:
    plan = _done_plan()
    response = browser_operator.post(f"/plans/{plan.pk}/activate/")
    assert response.status_code == 302
    plan.refresh_from_db()
    assert (plan.active, plan.version, plan.activated_by) == (True, 1, "ops")


def test_viewer_sees_no_controls_and_is_refused(viewer_browser: Client) -> None:
    plan = _done_plan()
    page = viewer_browser.get(f"/plans/{plan.pk}/").content.decode()
    assert 'id="activate"' not in page
    assert 'id="plan-create"' not in viewer_browser.get("/plans/").content.decode()
    assert viewer_browser.post(f"/plans/{plan.pk}/activate/").status_code == 403
    assert viewer_browser.post("/plans/", {"scenario": "small.toml"}).status_code == 403
    plan.refresh_from_db()
    assert plan.active is False
    assert Plan.objects.count() == 1


def test_anonymous_is_sent_to_login(client: Client) -> None:
    response = client.get("/plans/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_plan_tables_have_headers_in_words(browser_operator: Client) -> None:
    plan = _done_plan()
    listing = browser_operator.get("/plans/").content.decode()
    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()

    assert "<th>Scenario</th>" in listing and "<th>Config version</th>" in listing
    assert "<th>Role</th><th>Site</th><th>Chip</th><th>Instances</th><th>TP</th>" in page
    assert "<th>Simulated</th><th>Plan</th><th>Baseline</th>" in page
