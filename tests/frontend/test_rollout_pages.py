"""Topology and the plan page during a rollout: desired against running per pool of the desired
state, and each pool's agents by rollout state (issue #26 item 4)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from controlplane.agents.models import Agent, PoolOverride
from controlplane.planning.models import Plan
from tests import factories
from tests.frontend.test_plan_pages import DONE_RESULT

pytestmark = pytest.mark.django_db

NEW_P = "prefill/h800/tp4xpp2"


@pytest.fixture
def rollout() -> Plan:
    """Plan v2 wants 3 P at tp4xpp2 in dc-a and 1 MD in dc-b; dc-a's agents are mid-rollout:
    two new P serving, one starting, one old-shape P draining; an older MD reports no state."""
    return factories.rollout_world(
        {**DONE_RESULT, "pools": [
            {"site": "dc-a", "chip": "h800", "role": "P", "instances": 3, "tp": 4, "pp": 2,
             "chips": 24, "cost_per_hour": 48.0},
            {"site": "dc-b", "chip": "h800", "role": "MD", "instances": 1, "tp": 8,
             "chips": 8, "cost_per_hour": 16.0},
        ]},
        [("p-0", "dc-a", "prefill", "serving", NEW_P),
         ("p-1", "dc-a", "prefill", "serving", NEW_P),
         ("p-2", "dc-a", "prefill", "starting", NEW_P),
         ("p-old", "dc-a", "prefill", "draining", "prefill/h800/tp8"),
         ("md-0", "dc-b", "main", "", ""),
         ("p-dead", "dc-a", "prefill", "serving", NEW_P, 3600)],
    )  # fmt: skip


def _pool(html: str, key: str) -> str:
    found = re.search(rf'<li class="topo-pool[^"]*"[^>]*data-key="{re.escape(key)}".*?</li>', html,
                      re.S)  # fmt: skip
    assert found, key
    return found.group(0)


def test_topology_shows_desired_against_running_and_states_per_pool(
    browser_operator: Any, rollout: Plan
) -> None:
    html = browser_operator.get("/topology/").content.decode()

    new = _pool(html, NEW_P)
    assert 'data-desired="3" data-running="2"' in new
    assert 'class="topo-pool short"' in new
    assert "1 starting" in new and "2 serving" in new
    old = _pool(html, "prefill/h800/tp8")  # no longer desired: drained to 0
    assert 'data-desired="0" data-running="0"' in old and "1 draining" in old
    md = _pool(html, "main/h800/tp8")  # an older agent without a state counts for its role
    assert 'data-desired="1" data-running="1"' in md and "1 unknown" in md
    assert "the active plan (config v2)" in html


def test_an_override_shows_as_the_desired_count(browser_operator: Any, rollout: Plan) -> None:
    PoolOverride.objects.create(site=Agent.objects.get(name="p-0").site, version=2, pool=NEW_P,
                                instances=2, set_by="ops")  # fmt: skip

    new = _pool(browser_operator.get("/topology/").content.decode(), NEW_P)

    assert 'data-desired="2" data-running="2"' in new
    assert ">override<" in new


def test_the_active_plans_page_shows_its_rollout(browser_operator: Any, rollout: Plan) -> None:
    html = browser_operator.get(f"/plans/{rollout.pk}/").content.decode()

    table = html[html.index('id="plan-rollout"') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r'<tr data-key="([^"]+)" data-site="([^"]+)"[^>]*><td>[^<]*</td><td>[^<]*'
                      r'</td><td class="num">(\d+)</td><td class="num">(\d+)', table)  # fmt: skip
    assert rows == [(NEW_P, "dc-a", "2", "3"), ("prefill/h800/tp8", "dc-a", "0", "0"),
                    ("main/h800/tp8", "dc-b", "1", "1")]  # fmt: skip


def test_without_a_plan_topology_shows_the_inventorys_pools(browser_operator: Any) -> None:
    site = factories.site(slug="dc-a")
    factories.pool(slug="a-prefill", site=site, instance_count=2)

    html = browser_operator.get("/topology/").content.decode()

    assert 'data-desired="2" data-running="0"' in html
    assert "pools (no plan is active)" in html


NOT_ENACTED = (
    "The active plan is an aggregated design (colocated: each instance prefills and decodes); "
    "this plane&#x27;s agents run disaggregated roles only (prefill, relay, main), so it is not "
    "enacted: each site keeps the pools it runs."
)


@pytest.fixture
def aggregated() -> Plan:
    """The lead's demo: small.toml's aggregated plan (one P pool doing both phases) active; dc-a
    runs a P in its old pool, another P and an RLD in none; dc-b two MDs in none."""
    return factories.rollout_world(
        {**DONE_RESULT, "policy": "colocated", "pools": [
            {"site": "dc-a", "chip": "h800", "role": "P", "instances": 1, "tp": 2, "pp": 8,
             "chips": 16, "cost_per_hour": 32.0},
        ]},
        [("p-0", "dc-a", "prefill", "serving", "prefill/h800/tp4xpp4"),
         ("p-1", "dc-a", "prefill", "serving", ""),
         ("rld-0", "dc-a", "relay", "serving", ""),
         ("md-0", "dc-b", "main", "serving", ""),
         ("md-1", "dc-b", "main", "serving", "")],
        version=3,
    )  # fmt: skip


def _site(html: str, slug: str) -> str:
    start = html.index(f'id="site-{slug}"')
    return html[start : html.index("</article>", start)]


def test_topology_says_an_aggregated_plan_is_not_enacted_and_shows_what_runs(
    browser_operator: Any, aggregated: Plan
) -> None:
    html = browser_operator.get("/topology/").content.decode()

    assert NOT_ENACTED in html[html.index('id="not-enacted"') :]
    dc_b = _site(html, "dc-b")
    assert "No pools" not in dc_b
    main = re.findall(r'data-agent-role="main" data-key="" data-source="kept" data-desired="" '
                      r'data-running="(\d+)"', dc_b)  # fmt: skip
    assert main == ["2"] and "running, kept" in dc_b
    dc_a = _site(html, "dc-a")
    kept = _pool(dc_a, "prefill/h800/tp4xpp4")
    assert 'data-running="1"' in kept and "running / desired" not in kept
    assert "prefill/h800/tp2xpp8" not in dc_a  # the plan's pool is not shown as if enacted
    assert re.findall(r'data-agent-role="(\w+)" data-key="" data-source="kept" data-desired="" '
                      r'data-running="1"', dc_a) == ["prefill", "relay"]  # fmt: skip


def test_the_active_aggregated_plans_page_says_it_is_not_enacted(
    browser_operator: Any, aggregated: Plan
) -> None:
    html = browser_operator.get(f"/plans/{aggregated.pk}/").content.decode()

    assert NOT_ENACTED in html[html.index('id="plan-not-enacted"') :]
    table = html[html.index('id="plan-rollout"') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r'<tr data-key="([^"]+)" data-site="([^"]+)"[^>]*><td>[^<]*</td><td>'
                      r'[^<]*(?:<small>[^<]*</small>)?</td><td class="num">(\d+)</td>'
                      r'<td class="num"><span[^>]*>(kept)</span>', table)  # fmt: skip
    assert rows == [("prefill", "dc-a", "1", "kept"), ("prefill/h800/tp4xpp4", "dc-a", "1", "kept"),
                    ("relay", "dc-a", "1", "kept"), ("main", "dc-b", "2", "kept")]  # fmt: skip
