"""The plan page warns, with reasons, before activating a plan that does not beat its baseline."""

from __future__ import annotations

import copy

import pytest
from django.test import Client

from controlplane.planning.models import Plan, PlanStatus
from frontend.plan_verdict import shortfalls
from tests.frontend.test_plan_pages import DONE_RESULT


def _result(plan: dict[str, object], baseline: dict[str, object] | None) -> dict[str, object]:
    result = copy.deepcopy(DONE_RESULT)
    result["predicted"] = plan
    result["baseline"] = {"found": baseline is not None, "cost_table": [],
                          "predicted": baseline}  # fmt: skip
    return result


BETTER = {"cost_per_hour": 100.0, "bcr": 0.0080, "goodput_rps": 0.80, "sla_met": True}
WORSE = {"cost_per_hour": 132.0, "bcr": 0.0060, "goodput_rps": 0.79, "sla_met": True}
BASE = {"cost_per_hour": 128.0, "bcr": 0.0071, "goodput_rps": 0.91, "sla_met": True}


def test_a_plan_that_beats_its_baseline_has_no_shortfall() -> None:
    assert shortfalls(_result(BETTER, {**BASE, "goodput_rps": 0.80})) == []


def test_a_plan_without_a_baseline_has_no_comparison_to_fail() -> None:
    assert shortfalls(_result(BETTER, None)) == []


def test_each_way_a_plan_loses_is_named_with_both_figures() -> None:
    assert shortfalls(_result(WORSE, BASE)) == [
        "it costs more: $132.0/h against the baseline's $128.0/h (+3.1%)",
        "its BCR is lower: 6.00 against 7.10 (x1000 req/s per $/h)",
        "it serves less within the SLA: 0.790 req/s against 0.910",
    ]


def test_a_plan_the_simulator_says_misses_the_sla_is_flagged() -> None:
    assert shortfalls(_result({**BETTER, "sla_met": False}, None)) == [
        "the simulator says this plan misses the SLA"
    ]


@pytest.mark.django_db
def test_the_page_shows_the_reasons_and_asks_to_activate_anyway(browser_operator: Client) -> None:
    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               result=_result(WORSE, BASE), progress=100)  # fmt: skip

    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()

    assert 'id="plan-warning"' in page
    assert 'id="activate-warning"' in page
    assert "it costs more: $132.0/h against the baseline&#x27;s $128.0/h (+3.1%)" in page
    assert ">Activate anyway</button>" in page


@pytest.mark.django_db
def test_the_page_of_a_better_plan_has_no_warning(browser_operator: Client) -> None:
    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               result=_result(BETTER, None), progress=100)  # fmt: skip

    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()

    assert 'id="plan-warning"' not in page
    assert '<button type="submit" id="activate-confirm">Activate</button>' in page
