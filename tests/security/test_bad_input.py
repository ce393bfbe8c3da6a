"""Bad input gets a clear 4xx in the error envelope, never a 500 (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.agents.models import Agent
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def beating_agent(agent: Any) -> Agent:
    """An agent of ``dc-a`` (the agent persona's site)."""
    from controlplane.inventory.models import Site

    return Agent.objects.create(name="gw-0", site=Site.objects.get(slug="dc-a"), role="gateway")


def test_heartbeat_to_a_non_numeric_agent_id_is_404(agent: Any) -> None:
    response = agent.post("/api/v1/agents/abc/heartbeat/", {}, format="json")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_json_nested_3000_deep_is_400(operator: Any) -> None:
    body = "[" * 3000 + "]" * 3000

    response = operator.generic("POST", "/api/v1/sites/", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


def test_json_nested_past_the_limit_but_parseable_is_400(agent: Any) -> None:
    body = '{"records": ' + "[" * 100 + "]" * 100 + "}"

    response = agent.generic(
        "POST", "/api/v1/telemetry/records/", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "JSON nested deeper than 32 levels."


def test_a_50_mb_body_is_413_before_it_is_read(operator: Any) -> None:
    body = b"x" * (50 * 1024 * 1024)

    response = operator.generic("POST", "/api/v1/sites/", body, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_an_invoice_of_december_9999_is_400(operator: Any) -> None:
    factories.tenant(slug="demo")

    response = operator.get("/api/v1/billing/invoices/demo/9999-12/")

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "period": ["Expected a month as YYYY-MM (e.g. 2025-01), got '9999-12'."]
    }


@pytest.mark.parametrize("value", [2**31, 2**63, 10**30])
def test_a_config_version_past_the_column_range_is_400(
    agent: Any, beating_agent: Agent, value: int
) -> None:
    response = agent.post(
        f"/api/v1/agents/{beating_agent.pk}/heartbeat/", {"config_version": value}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["config_version"]


@pytest.mark.parametrize("value", [2**31, 2**63, 10**30])
def test_integers_past_the_column_range_in_a_record_are_400(agent: Any, value: int) -> None:
    factories.tenant(slug="acme")
    record = factories.request_record(output_tokens=value)

    response = agent.post("/api/v1/telemetry/records/", {"records": [record]}, format="json")

    assert response.status_code == 400
    assert "output_tokens" in response.json()["error"]["fields"]["records"]["0"]


@pytest.mark.parametrize("value", [2**63, 10**30])
def test_integers_past_the_column_range_in_inventory_are_400(operator: Any, value: int) -> None:
    site = factories.site()
    chip = factories.chip()
    model = factories.model_profile()
    body = {
        "slug": "pool-1",
        "site": site.slug,
        "chip": chip.slug,
        "model": model.slug,
        "role": "P",
        "instance_count": value,
        "chips_per_instance": 1,
    }

    response = operator.post("/api/v1/instance-pools/", body, format="json")

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["instance_count"]


@pytest.mark.parametrize(
    ("path", "status"),
    [("/api/v1/plans/{n}/", 404), ("/api/v1/agents/{n}/", 404), ("/api/v1/plans/?page={n}", 404)],
)
def test_lookups_past_the_column_range_are_not_500(operator: Any, path: str, status: int) -> None:
    response = operator.get(path.format(n=10**30))

    assert response.status_code == status


def test_nul_in_heartbeat_stats_is_400_and_nothing_is_stored(
    agent: Any, beating_agent: Agent
) -> None:
    response = agent.post(
        f"/api/v1/agents/{beating_agent.pk}/heartbeat/",
        {"stats": {"note": "a\u0000b"}},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "stats": ["Not storable: text must not contain NUL (\\u0000) characters."]
    }
    beating_agent.refresh_from_db()
    assert beating_agent.stats == {}


def test_nul_in_a_heartbeat_stats_key_is_400(agent: Any, beating_agent: Agent) -> None:
    response = agent.post(
        f"/api/v1/agents/{beating_agent.pk}/heartbeat/",
        {"stats": {"a\u0000": 1}},
        format="json",
    )

    assert response.status_code == 400


@pytest.mark.parametrize(
    "path", ["/api/v1/agents/?site=a%00b", "/api/v1/sites/?search=%00", "/api/v1/sites/x%00/"]
)
def test_nul_in_the_url_is_400(operator: Any, path: str) -> None:
    response = operator.get(path)

    assert response.status_code == 400
    assert response.json()["error"]["message"] == ("The URL must not contain NUL (%00) characters.")
