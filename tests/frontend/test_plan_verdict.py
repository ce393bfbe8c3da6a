"""The plan page shows the planner's own verdict with its tolerance (one judge), and warns before
activation only where the planner's figures say so."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.test import Client

from controlplane.planning.models import Plan, PlanStatus
from frontend.plan_verdict import planner_verdict, shortfalls
from tests.frontend.test_plan_pages import DONE_RESULT

TOLERANCE = "PDD is said to pay only when ... lies above 1"


def _result(judgement: str, *, sla_met: bool = True, recommended: str = "pdd") -> dict[str, Any]:
    result: dict[str, Any] = copy.deepcopy(DONE_RESULT)
    result["predicted"] = {"cost_per_hour": 100.0, "bcr": 0.008, "goodput_rps": 2.333,
                           "sla_met": sla_met}  # fmt: skip
    # The baseline served the same within the SLA: the page used to call that a shortfall.
    result["baseline"] = {"found": True, "cost_table": [], "predicted": {
        "cost_per_hour": 114.3, "bcr": 0.007, "goodput_rps": 2.333, "sla_met": True}}  # fmt: skip
    result["reasons"]["verdict"] = {
        "recommended": recommended,
        "judgement": judgement,
        "sentence": f"{judgement}: PDD $100.0/h against $114.3/h",
        "tolerance": TOLERANCE,
    }
    return result


def test_a_plan_the_planner_says_pays_has_no_shortfall_even_at_equal_goodput() -> None:
    assert shortfalls(_result("pays")) == []


def test_within_noise_on_a_recommended_pdd_plan_is_the_planners_own_caution() -> None:
    assert shortfalls(_result("within noise")) == [
        "the planner judges PDD's advantage within noise: within noise: PDD $100.0/h against "
        "$114.3/h"
    ]


def test_within_noise_does_not_warn_when_another_family_is_recommended() -> None:
    assert shortfalls(_result("within noise", recommended="same-dc")) == []


def test_a_plan_the_simulator_says_misses_the_sla_is_flagged() -> None:
    assert shortfalls(_result("pays", sla_met=False)) == [
        "the simulator says this plan misses the SLA"
    ]


def test_the_planners_verdict_is_read_as_it_is() -> None:
    assert planner_verdict(_result("pays")) == {
        "judgement": "pays",
        "sentence": "pays: PDD $100.0/h against $114.3/h",
        "tolerance": TOLERANCE,
    }
    assert planner_verdict({"reasons": {}}) is None


@pytest.mark.django_db
def test_the_page_shows_the_verdict_and_asks_to_activate_anyway(browser_operator: Client) -> None:
    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               result=_result("within noise"), progress=100)  # fmt: skip

    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()

    assert 'id="plan-verdict" data-judgement="within noise"' in page
    assert TOLERANCE in page
    assert 'id="plan-warning"' in page
    assert 'id="activate-warning"' in page
    assert ">Activate anyway</button>" in page


@pytest.mark.django_db
def test_the_page_of_a_plan_that_pays_has_no_warning(browser_operator: Client) -> None:
    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               result=_result("pays"), progress=100)  # fmt: skip

    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()

    assert 'id="plan-verdict" data-judgement="pays"' in page
    assert 'id="plan-warning"' not in page
    assert "serves less within the SLA" not in page
    assert '<button type="submit" id="activate-confirm">Activate</button>' in page


@pytest.mark.django_db
def test_before_activation_an_aggregated_plan_says_it_would_not_be_enacted(
    browser_operator: Client,
) -> None:
    result = {**_result("pays", recommended="colocated"), "policy": "colocated"}
    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               result=result, progress=100)  # fmt: skip

    page = browser_operator.get(f"/plans/{plan.pk}/").content.decode()

    said = (
        "this plan is an aggregated design (colocated: each instance prefills and decodes); this "
        "plane&#x27;s agents run disaggregated roles only (prefill, relay, main), so it would not "
        "be enacted: activating it changes only the routing table and the config version, and "
        "each site keeps the pools it runs"
    )
    warning = page[page.index('id="plan-warning"') : page.index('id="activate-form"')]
    assert said in warning
    assert said in page[page.index('id="activate-warning"') :]
    assert shortfalls(_result("pays")) == []  # a disaggregated plan (policy pdd) is enacted
