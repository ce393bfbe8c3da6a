"""Personas and shared fixtures for the whole suite.

Personas: an operator, a viewer, a billing client and an agent (API tokens), an outsider
(a bad token) and a browser operator (session). In CI (``CI`` set) tests marked ``postgres`` or
``redis`` fail instead of skipping when their service URL is missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    # Browser tests last: Playwright's sync API keeps an event loop running in the main thread
    # while a browser is open, which async_to_sync in other tests cannot run beside.
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
    for item in items:
        for marker, var in (("postgres", "DATABASE_URL"), ("redis", "REDIS_URL")):
            if item.get_closest_marker(marker) and not os.environ.get(var, "").strip():
                if os.environ.get("CI"):
                    item.add_marker(pytest.mark.usefixtures("_require_service_in_ci"))
                else:
                    item.add_marker(pytest.mark.skip(reason=f"needs {var} (set it to run)"))


@pytest.fixture
def issue_token(db: Any) -> Callable[[str], str]:
    from controlplane.accounts.services import api_token_issue

    counter = iter(range(10_000))

    def make(scope: str) -> str:
        # Agent tokens are always site-bound: the agent persona reports for site ``dc-a``.
        site = None
        if scope == "agent":
            from controlplane.inventory.models import Site

            site = Site.objects.get_or_create(slug="dc-a", defaults={"name": "DC A"})[0]
        return api_token_issue(name=f"{scope}-{next(counter)}", scope=scope, site=site).secret

    return make


def _client_with(token: str | None) -> Any:
    from rest_framework.test import APIClient

    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def anonymous() -> Any:
    return _client_with(None)


@pytest.fixture
def operator(issue_token: Callable[[str], str]) -> Any:
    return _client_with(issue_token("operator"))


@pytest.fixture
def viewer(issue_token: Callable[[str], str]) -> Any:
    return _client_with(issue_token("viewer"))


@pytest.fixture
def billing_client(issue_token: Callable[[str], str]) -> Any:
    return _client_with(issue_token("billing"))


@pytest.fixture
def agent(issue_token: Callable[[str], str]) -> Any:
    return _client_with(issue_token("agent"))


@pytest.fixture
def outsider(db: Any) -> Any:
    return _client_with("pdd_deadbeef_not-a-real-secret")


@pytest.fixture
def browser_operator(db: Any, django_user_model: Any) -> Any:
    from django.test import Client

    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def _require_service_in_ci(request: Any) -> None:
    pytest.fail("CI must provide DATABASE_URL and REDIS_URL; this test needs them")
