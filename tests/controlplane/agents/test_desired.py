"""A site's desired state over REST, and operators' overrides of one pool (contract (1) of #26).

Authorisation matrix: an agent token reads its own site's only (another site's: 403), operators
and viewers read any site, billing tokens nothing; only operators set or clear overrides, and a
refused write leaves no row behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from controlplane.agents.models import PoolOverride
from controlplane.planning.models import Plan, PlanStatus
from controlplane.planning.selectors import SCENARIO_DIR
from pdd_core.agent.desired import DesiredState

pytestmark = pytest.mark.django_db

P_POOL = {"site": "dc-a", "chip": "h800", "role": "P", "instances": 2, "tp": 4, "pp": 4,
          "cost_per_hour": 64.0, "reason": "prefill", "chunk_tokens": 4096}  # fmt: skip
RLD_POOL = {"site": "dc-a", "chip": "h800", "role": "RLD", "instances": 1, "tp": 2,
            "cost_per_hour": 8.0, "reason": "relay", "chunk_tokens": None}  # fmt: skip
MD_POOL = {"site": "dc-b", "chip": "h20", "role": "MD", "instances": 3, "tp": 2, "pp": 8,
           "cost_per_hour": 16.0, "reason": "decode"}  # fmt: skip
P_KEY = "prefill/h800/tp4xpp4"
DESIRED_A = "/api/v1/sites/dc-a/desired/"


def _active_plan(
    version: int = 5, pools: list[dict[str, Any]] | None = None, policy: str = "pdd"
) -> Plan:
    """A done plan of small.toml (its [engine] has max_batch 64), active under ``version``."""
    text = Path(SCENARIO_DIR / "small.toml").read_text()
    return Plan.objects.create(
        scenario="small.toml", inputs={"scenario_toml": text}, status=PlanStatus.DONE,
        result={"feasible": True, "model": "model-x", "routing_table": {}, "policy": policy,
                "pools": pools if pools is not None else [P_POOL, RLD_POOL, MD_POOL]},
        version=version, active=True, activated_at=timezone.now(),
    )  # fmt: skip


def test_without_an_active_plan_a_site_keeps_what_it_runs(agent_a: Any, settings: Any) -> None:
    settings.AGENT_DRAIN_TIMEOUT_S = 45

    response = agent_a.get(DESIRED_A)

    assert response.status_code == 200
    assert response.json() == {"site": "dc-a", "version": 0, "plan": None,
                               "drain_timeout_s": 45.0, "enacted": True, "reason": "",
                               "pools": []}  # fmt: skip


def test_a_site_is_given_the_active_plans_pools_in_it(agent_a: Any, site_b: Any) -> None:
    plan = _active_plan()

    body = agent_a.get(DESIRED_A).json()

    assert body == {
        "site": "dc-a", "version": 5, "plan": plan.pk, "drain_timeout_s": 30.0,
        "enacted": True, "reason": "",
        "pools": [
            {"key": P_KEY, "role": "prefill", "chip": "h800", "tp": 4, "pp": 4, "dp": 1, "ep": 1,
             "instances": 2, "engine": {"chunk_tokens": 4096, "max_batch": 64}, "source": "plan"},
            # no chunk budget of its own: the scenario's engine default (SimConfig's 16384)
            {"key": "relay/h800/tp2", "role": "relay", "chip": "h800", "tp": 2, "pp": 1, "dp": 1,
             "ep": 1, "instances": 1, "engine": {"chunk_tokens": 16384, "max_batch": 64},
             "source": "plan"},
        ],
    }  # fmt: skip
    DesiredState.from_dict(body)  # the data plane's parser accepts it as it is


def test_an_aggregated_plan_is_not_enacted_and_every_site_keeps_what_it_runs(
    agent_a: Any, operator: Any, site_b: Any
) -> None:
    # small.toml's aggregated recommendation: one pool doing prefill and decode (role "P").
    colocated = {**P_POOL, "instances": 1, "tp": 2, "pp": 8}
    plan = _active_plan(version=7, pools=[colocated], policy="colocated")

    body = agent_a.get(DESIRED_A).json()
    other = operator.get("/api/v1/sites/dc-b/desired/").json()

    assert body == {
        "site": "dc-a", "version": 7, "plan": plan.pk, "drain_timeout_s": 30.0,
        "enacted": False,
        "reason": "an aggregated design (colocated: each instance prefills and decodes); this "
                  "plane's agents run disaggregated roles only (prefill, relay, main)",
        "pools": [],
    }  # fmt: skip
    assert (other["enacted"], other["pools"]) == (False, [])
    parsed = DesiredState.from_dict(body)  # the data plane's parser: keep what you run
    assert (parsed.enacted, parsed.pools, parsed.version) == (False, (), 7)
    refused = operator.post(f"{DESIRED_A}pools/prefill/h800/tp2xpp8/override/",
                            {"instances": 2}, format="json")  # fmt: skip
    assert refused.status_code == 409
    assert "not enacted" in str(refused.json()["error"])


@pytest.mark.parametrize("persona", ["operator", "viewer"])
def test_operators_and_viewers_read_any_site(
    request: pytest.FixtureRequest, persona: str, site_b: Any
) -> None:
    _active_plan()
    client = request.getfixturevalue(persona)

    body = client.get("/api/v1/sites/dc-b/desired/").json()

    assert [(p["key"], p["instances"]) for p in body["pools"]] == [("main/h20/tp2xpp8", 3)]


def test_another_sites_agent_token_is_refused(agent_b: Any, site_a: Any) -> None:
    _active_plan()

    response = agent_b.get(DESIRED_A)

    assert response.status_code == 403
    assert "another site" in response.json()["error"]["message"]


@pytest.mark.parametrize(("persona", "status"), [("billing_client", 403), ("anonymous", 401),
                                                 ("outsider", 401)])  # fmt: skip
def test_billing_tokens_and_strangers_read_nothing(
    request: pytest.FixtureRequest, persona: str, status: int, site_a: Any
) -> None:
    assert request.getfixturevalue(persona).get(DESIRED_A).status_code == status


def test_an_unknown_site_is_404(operator: Any) -> None:
    assert operator.get("/api/v1/sites/nowhere/desired/").status_code == 404


def test_an_operators_override_changes_one_count_and_nothing_else(
    operator: Any, agent_a: Any
) -> None:
    _active_plan()

    response = operator.post(f"{DESIRED_A}pools/{P_KEY}/override/",
                             {"instances": 5, "reason": "load test"}, format="json")  # fmt: skip

    assert response.status_code == 201, response.json()
    assert (response.json()["instances"], response.json()["version"]) == (5, 5)
    body = agent_a.get(DESIRED_A).json()
    assert body["version"] == 5  # not bumped
    assert [(p["key"], p["instances"], p["source"]) for p in body["pools"]] == [
        (P_KEY, 5, "override"), ("relay/h800/tp2", 1, "plan"),
    ]  # fmt: skip


def test_a_new_override_clears_the_previous_one_and_both_stay_audited(
    operator: Any, site_a: Any
) -> None:
    _active_plan()
    url = f"{DESIRED_A}pools/{P_KEY}/override/"
    operator.post(url, {"instances": 5}, format="json")

    operator.post(url, {"instances": 0}, format="json")
    cleared = operator.delete(url)

    assert cleared.status_code == 204
    rows = list(PoolOverride.objects.order_by("id").values_list("instances", "cleared_at"))
    assert [n for n, _ in rows] == [5, 0]
    assert all(at is not None for _, at in rows)
    history = operator.get(f"{DESIRED_A}overrides/").json()
    assert [(h["instances"], h["set_by"].startswith("token:")) for h in history] == [
        (0, True), (5, True),
    ]  # fmt: skip
    assert operator.get(DESIRED_A).json()["pools"][0]["source"] == "plan"


def test_an_override_lapses_when_another_plan_is_activated(operator: Any, site_a: Any) -> None:
    old = _active_plan()
    operator.post(f"{DESIRED_A}pools/{P_KEY}/override/", {"instances": 5}, format="json")
    Plan.objects.filter(pk=old.pk).update(active=False)

    _active_plan(version=6)

    assert operator.get(DESIRED_A).json()["pools"][0]["instances"] == 2


@pytest.mark.parametrize("persona", ["viewer", "agent", "billing_client"])
def test_only_operators_override(request: pytest.FixtureRequest, persona: str, site_a: Any) -> None:
    _active_plan()
    client = request.getfixturevalue(persona)
    url = f"{DESIRED_A}pools/{P_KEY}/override/"

    assert client.post(url, {"instances": 5}, format="json").status_code == 403
    assert client.delete(url).status_code == 403
    assert not PoolOverride.objects.exists()


@pytest.mark.parametrize(
    ("pool", "body", "status", "message"),
    [
        (P_KEY, {"instances": -1}, 400, "instances"),
        (P_KEY, {"instances": 1025}, 400, "instances"),
        (P_KEY, {}, 400, "instances"),
        ("main/h20/tp2xpp8", {"instances": 1}, 404, "has no pool 'main/h20/tp2xpp8'"),
    ],
)
def test_a_bad_override_is_refused(
    operator: Any, site_a: Any, pool: str, body: dict[str, Any], status: int, message: str
) -> None:
    _active_plan()

    response = operator.post(f"{DESIRED_A}pools/{pool}/override/", body, format="json")

    assert response.status_code == status
    assert message in str(response.json()["error"])
    assert not PoolOverride.objects.exists()


def test_nothing_to_override_without_an_active_plan(operator: Any, site_a: Any) -> None:
    response = operator.post(f"{DESIRED_A}pools/{P_KEY}/override/", {"instances": 1},
                             format="json")  # fmt: skip

    assert response.status_code == 409
    assert not PoolOverride.objects.exists()


def test_clearing_an_override_that_is_not_in_force_is_404(operator: Any, site_a: Any) -> None:
    _active_plan()

    assert operator.delete(f"{DESIRED_A}pools/{P_KEY}/override/").status_code == 404
