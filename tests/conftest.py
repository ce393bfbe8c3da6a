"""Personas and shared fixtures for the whole suite.

Personas: an operator, a viewer, a billing client and an agent (API tokens), an outsider
(a bad token) and a browser operator (session). In CI (``CI`` set) tests marked ``postgres`` or
``redis`` fail instead of skipping when their service URL is missing.

Hygiene: every test gets fresh channel-layer instances (a Redis layer's locks belong to the event
loop that first used them, and each async test has its own loop); channel-layer keys carry a
per-run prefix and are deleted at the end, as are the run's Celery result keys; and on
PostgreSQL the sessions other threads left open on the test database are ended before it is
dropped, so it is not left behind.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# Set before Django reads its settings (pytest-django does that after loading conftests), and
# inherited by the servers and agents tests start, so their keys carry it too.
TEST_CHANNEL_PREFIX = f"pdd-test-{uuid.uuid4().hex[:8]}"
os.environ["PDD_CHANNEL_PREFIX"] = TEST_CHANNEL_PREFIX


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
        # Agent tokens are always site-bound: the agent persona reports for site ``dc-a``,
        # whose gateway agent ``gateway`` (the factory records' writer) is registered.
        site = None
        if scope == "agent":
            from controlplane.agents.models import Agent
            from controlplane.inventory.models import Site

            site = Site.objects.get_or_create(slug="dc-a", defaults={"name": "DC A"})[0]
            Agent.objects.get_or_create(name="gateway", defaults={"site": site, "role": "gateway"})
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


def _token_persona(name: str, scope: str) -> Any:
    """A fixture ``name``: an API client holding a fresh token of ``scope``."""

    def persona(issue_token: Callable[[str], str]) -> Any:
        return _client_with(issue_token(scope))

    return pytest.fixture(name=name)(persona)


operator = _token_persona("operator", "operator")
viewer = _token_persona("viewer", "viewer")
billing_client = _token_persona("billing_client", "billing")
agent = _token_persona("agent", "agent")


@pytest.fixture
def outsider(db: Any) -> Any:
    return _client_with("pdd_deadbeef_not-a-real-secret")


def _logged_in(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def browser_operator(db: Any, django_user_model: Any) -> Any:
    """A browser session of a superuser (the operator of the pages)."""
    return _logged_in(
        django_user_model.objects.create_superuser("ops", "ops@example.com", "pw-ops-123")
    )


@pytest.fixture
def viewer_browser(db: Any, django_user_model: Any) -> Any:
    """A browser session of a member of the ``viewer`` group (pages read-only)."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("viewer", password="pw-viewer-1")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    return _logged_in(user)


@pytest.fixture
def _require_service_in_ci(request: Any) -> None:
    pytest.fail("CI must provide DATABASE_URL and REDIS_URL; this test needs them")


@pytest.fixture(autouse=True)
def _fresh_channel_layers() -> Iterator[None]:
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(scope="session", autouse=True)
def _redis_keys_removed_after_the_run() -> Iterator[None]:
    """Delete the run's channel-layer keys (its prefix) and Celery results when it ends."""
    from django.conf import settings

    # Django may have read its settings before this module set the variable.
    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    if "prefix" in config:
        config["prefix"] = TEST_CHANNEL_PREFIX
    url = os.environ.get("REDIS_URL", "").strip()
    yield
    if not url:
        return
    import redis

    client = redis.Redis.from_url(url)
    try:
        for pattern in (f"{TEST_CHANNEL_PREFIX}*", "celery-task-meta-*"):
            batch = list(client.scan_iter(match=pattern, count=500))
            for start in range(0, len(batch), 500):
                client.delete(*batch[start : start + 500])
    finally:
        client.close()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database, with other threads' sessions ended before it is dropped.

    Channels runs ORM calls in worker threads (``database_sync_to_async``) whose connections
    outlive the test; PostgreSQL refuses to drop a database with sessions on it.
    """
    yield
    from django.db import connections

    with django_db_blocker.unblock():
        for connection in connections.all():
            if connection.vendor != "postgresql":
                continue
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
