"""The OpenAPI document is valid OpenAPI 3 and documents every API route."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_schema_is_valid_openapi_3(viewer: Any) -> None:
    response = viewer.get("/api/schema/?format=json")

    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    for path in ("/api/v1/sites/", "/api/v1/chip-models/", "/api/v1/links/",
                 "/api/v1/model-profiles/", "/api/v1/instance-pools/"):  # fmt: skip
        assert path in doc["paths"]
    schemes = doc["components"]["securitySchemes"]
    assert schemes["apiToken"] == {
        "type": "http", "scheme": "bearer",
        "description": "An API token `pdd_<prefix>_<secret>`; its scope decides access.",
    }  # fmt: skip
    assert schemes["metricsToken"] == {
        "type": "http", "scheme": "bearer",
        "description": "The dedicated PDD_METRICS_TOKEN (for Prometheus scrapes).",
    }  # fmt: skip


def test_spectacular_validates_without_warnings() -> None:
    """drf-spectacular's own validator checks the document against the OpenAPI 3 JSON schema."""
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null",
                 stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip


def test_docs_page_served_to_authenticated_users(browser_operator: Any) -> None:
    assert browser_operator.get("/api/docs/").status_code == 200


@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_docs_pages_send_an_anonymous_browser_to_the_login_and_back(client: Any, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_docs_pages_still_answer_a_bad_token_with_401(client: Any) -> None:
    response = client.get("/api/docs/", HTTP_AUTHORIZATION="Bearer pdd_nope_nope")

    assert response.status_code == 401


@pytest.mark.parametrize("scope", ["operator", "viewer", "billing", "agent"])
@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_docs_pages_are_served_to_every_token_scope(
    issue_token: Any, scope: str, path: str
) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(scope)}")

    response = client.get(path)

    assert response.status_code == 200


@pytest.mark.parametrize(
    ("path", "asset"),
    [("/api/docs/", "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"),
     ("/api/redoc/", "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js")],
)  # fmt: skip
def test_docs_pages_load_their_scripts_from_this_server(
    browser_operator: Any, path: str, asset: str
) -> None:
    page = browser_operator.get(path).content.decode()
    script = browser_operator.get(f"/static/{asset}")

    assert f'src="/static/{asset}"' in page
    assert "cdn" not in page.lower()
    assert script.status_code == 200


def test_the_schema_says_a_plans_workload_may_be_null(viewer: Any) -> None:
    plan = viewer.get("/api/schema/?format=json").json()["components"]["schemas"]["Plan"]

    assert plan["properties"]["workload"]["nullable"] is True
