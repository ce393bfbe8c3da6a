from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.accounts.services import api_token_issue
from tests import factories
from tests.live_server import ServerProcess, database_url


@pytest.fixture
def site_a(db: Any) -> Any:
    from controlplane.inventory.models import Site

    # the agent persona's site, when that fixture made it first
    return Site.objects.filter(slug="dc-a").first() or factories.site(slug="dc-a")


@pytest.fixture
def site_b(db: Any) -> Any:
    return factories.site(slug="dc-b")


def agent_client(site: Any, name: str) -> tuple[APIClient, str]:
    secret = api_token_issue(name=name, scope="agent", site=site).secret
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client, secret


@pytest.fixture
def agent_a(site_a: Any) -> APIClient:
    return agent_client(site_a, "agent-token-a")[0]


@pytest.fixture
def agent_b(site_b: Any) -> APIClient:
    return agent_client(site_b, "agent-token-b")[0]


@pytest.fixture
def server(tmp_path: Path, django_db_blocker: Any) -> Iterator[ServerProcess]:
    """The control plane as a real daphne process on the test database; tests may restart it."""
    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    process = ServerProcess(url, tmp_path / "data", tmp_path / "daphne.log")
    process.start()
    yield process
    process.stop()
