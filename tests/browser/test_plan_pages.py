"""Plan pages in Chromium: request a plan, watch it finish, see the bathtub, activate it.

The daphne process runs Celery eagerly (``PDD_CELERY_EAGER=1``) even when the suite has
``REDIS_URL``: the page flow is under test here, the worker is ``tests/system``'s business.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from tests.browser.conftest import log_in, screenshot, serve

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def eager_server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    yield from serve(django_db_blocker, tmp_path_factory, PDD_CELERY_EAGER="1")


def test_operator_plans_sees_the_bathtub_and_activates(eager_server: str, page: Any) -> None:
    from controlplane.planning.models import Plan

    User.objects.create_superuser("ops", "ops@example.com", "ops-pass-123")
    viewer = User.objects.create_user("watcher", "w@example.com", "watch-pass-123")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])

    log_in(page, eager_server, "ops", "ops-pass-123")
    page.click("header.top nav >> text=Plans")
    page.select_option("#id_scenario", "small.toml")
    page.click("#plan-create button[type=submit]")

    page.wait_for_selector("#plan-status[data-status=done]", timeout=120_000)
    page.wait_for_selector("#bathtub-chart.js-plotly-plot")
    traces = page.eval_on_selector("#bathtub-chart", "e => e.data.length")
    points = page.eval_on_selector("#bathtub-chart", "e => e.data[0].x.length")
    assert traces >= 3
    assert points == 11
    plan = Plan.objects.get()
    # One row per pool the planner chose (RLD is its own pool or time-shared on P).
    assert page.locator("#plan-pools tbody tr").count() == len(plan.result["pools"])
    assert "binding:" in page.inner_text("#plan-reasons")
    screenshot(page, "plan")

    page.click("#activate")
    assert page.is_visible("#activate-dialog")
    page.click("#activate-confirm")
    page.wait_for_selector("text=active · version 1")
    plan.refresh_from_db()
    assert plan.active is True
    assert plan.version == 1

    page.click("text=Log out")
    log_in(page, eager_server, "watcher", "watch-pass-123")
    page.goto(f"{eager_server}/plans/{plan.pk}/")
    page.wait_for_selector("#bathtub-chart.js-plotly-plot")
    assert page.locator("#activate").count() == 0
    assert page.locator("#plan-create").count() == 0


def test_a_plan_the_planner_judges_within_noise_warns_before_activation(
    eager_server: str, page: Any
) -> None:
    import copy

    from controlplane.planning.models import Plan, PlanStatus
    from tests.frontend.test_plan_pages import DONE_RESULT

    result = copy.deepcopy(DONE_RESULT)
    result["predicted"] = {"cost_per_hour": 132.0, "bcr": 0.0060, "goodput_rps": 0.79,
                           "sla_met": True}  # fmt: skip
    result["reasons"]["verdict"] = {
        "recommended": "pdd",
        "judgement": "within noise",
        "sentence": "Within noise: PDD costs $132.0/h against $128.0/h",
        "tolerance": "PDD is said to pay only when the interval lies above 1",
    }
    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               result=result, progress=100)  # fmt: skip
    User.objects.create_superuser("boss", "boss@example.com", "boss-pass-123")

    log_in(page, eager_server, "boss", "boss-pass-123")
    page.goto(f"{eager_server}/plans/{plan.pk}/")
    assert "within noise" in page.inner_text("#plan-verdict")
    assert "interval lies above 1" in page.inner_text("#plan-tolerance")
    page.click("#activate")

    assert page.is_visible("#activate-dialog")
    warning = page.inner_text("#activate-warning")
    assert "Before activating this plan:" in warning
    assert "the planner judges PDD's advantage within noise" in warning
    assert page.inner_text("#activate-confirm") == "Activate anyway"
    screenshot(page, "plan-warning")
    page.click("#activate-cancel")
    plan.refresh_from_db()
    assert plan.active is False


def test_the_status_badge_follows_a_queued_plan_as_it_runs_and_finishes(
    eager_server: str, page: Any
) -> None:
    from controlplane.planning.models import Plan, PlanStatus

    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.QUEUED)
    User.objects.create_superuser("runner", "runner@example.com", "runner-pass-123")
    log_in(page, eager_server, "runner", "runner-pass-123")
    page.goto(f"{eager_server}/plans/{plan.pk}/")
    assert page.inner_text("#plan-status") == "queued"

    Plan.objects.filter(pk=plan.pk).update(
        status=PlanStatus.RUNNING, progress=40, message="searching designs"
    )
    page.wait_for_selector("#plan-status[data-status=running]")
    assert page.inner_text("#plan-status") == "running"
    assert page.inner_text("#plan-progress span") == "40%"
    assert page.inner_text("#plan-progress small") == "searching designs"
    screenshot(page, "plan-running")

    Plan.objects.filter(pk=plan.pk).update(status=PlanStatus.FAILED, error="planner stopped")
    page.wait_for_selector("#plan-status[data-status=failed]")
    assert "planner stopped" in page.inner_text("#plan-error")
