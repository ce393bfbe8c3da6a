"""Agent registration and heartbeats: site-bound tokens, scopes, health derived from beats."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.agents.models import Agent
from tests.controlplane.agents.conftest import agent_client

pytestmark = pytest.mark.django_db

REGISTER = {"name": "p-0", "site": "dc-a", "role": "prefill", "address": "127.0.0.1:9001",
            "engine": "timed", "software_version": "0.1.0"}  # fmt: skip


def test_agent_registers_in_its_own_site(agent_a: Any) -> None:
    response = agent_a.post("/api/v1/agents/register/", REGISTER)

    assert response.status_code == 201, response.json()
    body = response.json()
    agent = Agent.objects.get(pk=body["id"])
    assert (agent.name, agent.site.slug, agent.role) == ("p-0", "dc-a", "prefill")
    assert body["config_ws"] == f"/ws/agents/{agent.pk}/"
    assert body["config_version"] == 0
    assert agent.status == "healthy"


def test_agent_of_one_site_cannot_register_for_another(agent_b: Any, site_a: Any) -> None:
    response = agent_b.post("/api/v1/agents/register/", REGISTER)

    assert response.status_code == 403
    assert "another site" in response.json()["error"]["message"]
    assert not Agent.objects.exists()


@pytest.mark.parametrize("persona", ["operator", "viewer", "billing_client"])
def test_only_agent_tokens_register(
    request: pytest.FixtureRequest, persona: str, site_a: Any
) -> None:
    client = request.getfixturevalue(persona)

    assert client.post("/api/v1/agents/register/", REGISTER).status_code == 403
    assert not Agent.objects.exists()


def test_re_registration_updates_the_same_agent(agent_a: Any) -> None:
    first = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]
    second = agent_a.post("/api/v1/agents/register/", {**REGISTER, "address": "127.0.0.1:9009"})

    assert second.json()["id"] == first
    assert Agent.objects.get().address == "127.0.0.1:9009"


def test_same_name_in_another_site_is_a_conflict(agent_a: Any, site_b: Any) -> None:
    agent_a.post("/api/v1/agents/register/", REGISTER)
    other, _ = agent_client(site_b, "b-token")

    response = other.post("/api/v1/agents/register/", {**REGISTER, "site": "dc-b"})

    assert response.status_code == 409
    assert Agent.objects.get().site.slug == "dc-a"


def test_malformed_registration_is_400(agent_a: Any) -> None:
    response = agent_a.post("/api/v1/agents/register/", {"name": "Bad Name!", "site": "nowhere",
                                                         "role": "boss"})  # fmt: skip

    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"name", "site", "role"}


def test_heartbeat_records_version_stats_and_outage(agent_a: Any) -> None:
    agent_id = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]
    since = (timezone.now() - timedelta(minutes=3)).isoformat()

    response = agent_a.post(
        f"/api/v1/agents/{agent_id}/heartbeat/",
        {"config_version": 4, "unreachable_since": since, "stats": {"journal_pending": 12}},
    )

    assert response.status_code == 200
    agent = Agent.objects.get(pk=agent_id)
    assert agent.config_version == 4
    assert agent.stats == {"journal_pending": 12}
    assert agent.last_outage_started_at is not None
    assert agent.last_outage_ended_at is not None


def test_heartbeat_for_another_sites_agent_is_refused(agent_a: Any, agent_b: Any) -> None:
    agent_id = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]
    before = Agent.objects.get(pk=agent_id).last_heartbeat_at

    response = agent_b.post(f"/api/v1/agents/{agent_id}/heartbeat/", {"config_version": 9})

    assert response.status_code == 403
    agent = Agent.objects.get(pk=agent_id)
    assert agent.config_version is None
    assert agent.last_heartbeat_at == before


def test_status_is_derived_from_the_last_heartbeat(agent_a: Any, settings: Any) -> None:
    settings.AGENT_STALE_AFTER_S = 15
    settings.AGENT_DEAD_AFTER_S = 60
    agent_id = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]
    agent = Agent.objects.get(pk=agent_id)

    agent.last_heartbeat_at = timezone.now() - timedelta(seconds=30)
    assert agent.status == "stale"
    agent.last_heartbeat_at = timezone.now() - timedelta(seconds=61)
    assert agent.status == "dead"


def test_operators_and_viewers_list_agents_with_status(agent_a: Any, viewer: Any) -> None:
    agent_a.post("/api/v1/agents/register/", REGISTER)
    agent_a.post("/api/v1/agents/register/", {**REGISTER, "name": "p-1"})
    Agent.objects.filter(name="p-1").update(last_heartbeat_at=timezone.now() - timedelta(hours=1))

    everyone = viewer.get("/api/v1/agents/").json()
    healthy = viewer.get("/api/v1/agents/?status=healthy").json()
    dead = viewer.get("/api/v1/agents/?status=dead").json()

    assert everyone["count"] == 2
    assert [a["name"] for a in healthy["results"]] == ["p-0"]
    assert [a["name"] for a in dead["results"]] == ["p-1"]
    assert agent_a.get("/api/v1/agents/").status_code == 403  # agents do not read the registry


def test_heartbeat_records_the_rollout_state_and_pool(agent_a: Any, viewer: Any) -> None:
    agent_id = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]

    beat = {"state": "draining", "pool": "prefill/h800/tp4xpp4"}
    response = agent_a.post(f"/api/v1/agents/{agent_id}/heartbeat/", beat, format="json")

    assert response.status_code == 200, response.json()
    assert (response.json()["state"], response.json()["pool"]) == (
        "draining", "prefill/h800/tp4xpp4",
    )  # fmt: skip
    listed = viewer.get("/api/v1/agents/").json()["results"][0]
    assert (listed["state"], listed["pool"]) == ("draining", "prefill/h800/tp4xpp4")


def test_a_heartbeat_without_a_state_is_valid_and_the_state_unknown(agent_a: Any) -> None:
    agent_id = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]
    agent_a.post(f"/api/v1/agents/{agent_id}/heartbeat/", {"state": "serving"}, format="json")

    response = agent_a.post(f"/api/v1/agents/{agent_id}/heartbeat/", {"config_version": 1},
                            format="json")  # fmt: skip

    assert response.status_code == 200
    assert (Agent.objects.get().state, Agent.objects.get().pool) == ("", "")


@pytest.mark.parametrize(
    ("body", "field"),
    [({"state": "sleeping"}, "state"), ({"state": "serving", "pool": "P/h800/tp4"}, "pool"),
     ({"state": "serving", "pool": "x" * 101}, "pool")],
)  # fmt: skip
def test_a_malformed_rollout_state_is_400_naming_the_field(
    agent_a: Any, body: dict[str, Any], field: str
) -> None:
    agent_id = agent_a.post("/api/v1/agents/register/", REGISTER).json()["id"]

    response = agent_a.post(f"/api/v1/agents/{agent_id}/heartbeat/", body, format="json")

    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {field}
    assert Agent.objects.get().state == ""
