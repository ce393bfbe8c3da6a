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


# The same on every backend: SQLite answers PostgreSQL's column ranges (core/sqlite3).
@pytest.mark.parametrize("value", [2**31, 2**63 - 1, 2**63, 10**30])
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


@pytest.mark.parametrize("position", ["abc", "-1", "1.5", "²", str(2**63), str(10**30)])
def test_a_usage_cursor_whose_position_is_not_an_id_is_404(operator: Any, position: str) -> None:
    import base64

    cursor = base64.b64encode(f"p={position}".encode()).decode()

    response = operator.get("/api/v1/billing/usage-records/", {"cursor": cursor})

    assert response.status_code == 404
    assert response.json()["error"] == {
        "status": 404, "code": "not_found", "message": "Invalid cursor", "fields": {},
    }  # fmt: skip


@pytest.mark.parametrize("cursor", ["not-a-cursor", "cD0xJnI9MSZvPXh4eA==", "////"])
def test_a_usage_cursor_that_is_not_ours_is_404(operator: Any, cursor: str) -> None:
    # Not base64; base64 of another shape (p=1&r=1&o=xxx); base64 of bytes that are not text.
    response = operator.get("/api/v1/billing/usage-records/", {"cursor": cursor})

    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Invalid cursor"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"page_size": "abc"}, "page_size"),
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "-3"}, "page_size"),
        ({"is_estimate": "5"}, "is_estimate"),
        ({"is_estimate": "%s%d 100%"}, "is_estimate"),  # formatted as a parameter, not by %
    ],
)
def test_a_list_parameter_it_cannot_read_is_400_naming_it(
    operator: Any, query: dict[str, str], field: str
) -> None:
    response = operator.get("/api/v1/chip-models/", query)

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [field]


def test_a_page_size_past_the_maximum_is_cut_to_it_and_an_empty_one_is_absent(
    operator: Any,
) -> None:
    assert operator.get("/api/v1/sites/", {"page_size": "100000"}).status_code == 200
    assert (
        operator.get("/api/v1/chip-models/", {"page_size": "", "is_estimate": ""}).status_code
        == 200
    )


def test_an_agent_status_that_is_not_one_is_400(operator: Any) -> None:
    response = operator.get("/api/v1/agents/", {"status": "sleepy"})

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["status"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"slug": "s1", "name": "S", "description": 2.5e16}, "description"),
        ({"slug": 7, "name": "S"}, "slug"),
        ({"slug": "s1", "name": True}, "name"),
    ],
)
def test_a_json_value_of_the_wrong_type_is_400_and_nothing_is_stored(
    operator: Any, body: dict[str, Any], field: str
) -> None:
    from controlplane.inventory.models import Site

    response = operator.post("/api/v1/sites/", body, format="json")

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [field]
    assert not Site.objects.filter(name="S").exists()


def test_a_pool_written_with_slugs_is_created(operator: Any) -> None:
    """Request bodies are documented in their write shape: related objects as slugs."""
    site, chip = factories.site(slug="dc-w"), factories.chip(slug="chip-w")
    model = factories.model_profile(slug="model-w")

    response = operator.post(
        "/api/v1/instance-pools/",
        {"slug": "pool-w", "site": site.slug, "chip": chip.slug, "model": model.slug,
         "role": "P", "chips_per_instance": 1},
        format="json",
    )  # fmt: skip

    assert response.status_code == 201, response.json()
    assert response.json()["site"] == {"id": site.pk, "slug": "dc-w", "name": site.name}


def test_a_trace_line_nested_5000_deep_is_400_naming_the_line(operator: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    good = b'{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'
    deep = b"[" * 5000 + b"]" * 5000 + b"\n"
    upload = SimpleUploadedFile("t.jsonl", good + deep, "application/jsonl")

    response = operator.post("/api/v1/workloads/", {"name": "deep", "file": upload},
                             format="multipart")  # fmt: skip

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "file": ["line 2: json: nested too deeply to be a trace record"]
    }
