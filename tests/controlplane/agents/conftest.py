from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.accounts.services import api_token_issue
from tests import factories


@pytest.fixture
def site_a(db: Any) -> Any:
    return factories.site(slug="dc-a")


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
