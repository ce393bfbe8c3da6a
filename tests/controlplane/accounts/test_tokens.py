"""API tokens: shown once, stored hashed, revocable; the create_token command."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from controlplane.accounts.models import ApiToken
from controlplane.accounts.services import api_token_issue, api_token_revoke
from pdd_core.keys import hash_key
from tests import factories

pytestmark = pytest.mark.django_db


def test_create_token_prints_the_secret_on_the_last_line_and_stores_a_hash() -> None:
    out = io.StringIO()

    call_command("create_token", "--name", "billing-system", "--scope", "billing", stdout=out)

    secret = out.getvalue().strip().splitlines()[-1]
    token = ApiToken.objects.get(name="billing-system")
    assert secret.startswith(f"pdd_{token.prefix}_")
    assert token.scope == "billing"
    assert token.key_hash == hash_key(secret)
    assert secret not in {token.key_hash, token.prefix, token.name}


def test_create_token_refuses_unknown_scope_and_duplicate_name() -> None:
    call_command("create_token", "--name", "dup", "--scope", "viewer", stdout=io.StringIO())

    with pytest.raises(CommandError):
        call_command("create_token", "--name", "dup", "--scope", "viewer", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("create_token", "--name", "x", "--scope", "root", stdout=io.StringIO())
    assert ApiToken.objects.count() == 1


def test_revoked_token_is_refused() -> None:
    issued = api_token_issue(name="ops", scope="operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert client.get("/api/v1/sites/").status_code == 200

    api_token_revoke(token=issued.token)

    response = client.get("/api/v1/sites/")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid or revoked API token."


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Basic dXNlcjpwYXNz", "Bearer pdd_nope", "Bearer a b", "Bearer pdd_00000000_wrong"],
)
def test_malformed_or_wrong_tokens_get_401(header: str) -> None:
    api_token_issue(name="real", scope="operator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    response = client.get("/api/v1/sites/")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_right_prefix_wrong_secret_is_refused() -> None:
    issued = api_token_issue(name="real", scope="operator")
    forged = f"pdd_{issued.token.prefix}_{'x' * 43}"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")

    assert client.get("/api/v1/sites/").status_code == 401


def test_use_is_recorded() -> None:
    issued = api_token_issue(name="real", scope="viewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")

    client.get("/api/v1/sites/")

    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None


def test_admin_creates_token_and_shows_it_once(browser_operator: Any) -> None:
    site = factories.site(slug="dc-a")
    response = browser_operator.post(
        "/admin/accounts/apitoken/add/",
        {"name": "from-admin", "scope": "agent", "site": site.pk},
        follow=True,
    )

    token = ApiToken.objects.get(name="from-admin")
    messages = [str(m) for m in response.context["messages"]]
    shown = [m for m in messages if "will not be shown again" in m]
    assert len(shown) == 1
    secret = shown[0].rsplit(" ", 1)[-1]
    assert token.key_hash == hash_key(secret)
    assert (token.scope, token.site) == ("agent", site)


def test_admin_refuses_an_agent_token_without_a_site(browser_operator: Any) -> None:
    response = browser_operator.post(
        "/admin/accounts/apitoken/add/", {"name": "unbound", "scope": "agent"}
    )

    assert response.status_code == 200  # the form again, with the error
    assert "An agent token must be bound to a site." in response.content.decode()
    assert not ApiToken.objects.filter(name="unbound").exists()


def test_an_agent_token_must_be_bound_to_a_site(db: Any) -> None:
    with pytest.raises(ValueError, match="site: an agent token must be bound"):
        api_token_issue(name="unbound", scope="agent")

    assert not ApiToken.objects.filter(name="unbound").exists()


def test_browser_scopes_follow_groups(django_user_model: Any) -> None:
    from django.contrib.auth.models import Group
    from django.test import Client

    user = django_user_model.objects.create_user("v", password="pw-v-12345")
    client = Client()
    client.force_login(user)
    assert client.get("/api/v1/sites/").status_code == 200
    assert (
        client.post(
            "/api/v1/sites/", {"slug": "s", "name": "S"}, content_type="application/json"
        ).status_code
        == 403
    )

    user.groups.add(Group.objects.create(name="billing"))

    assert client.get("/api/v1/sites/").status_code == 403


def test_session_writes_need_csrf(django_user_model: Any) -> None:
    from django.test import Client

    user = django_user_model.objects.create_superuser("op", "op@example.com", "pw-op-12345")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    response = client.post(
        "/api/v1/sites/", {"slug": "s", "name": "S"}, content_type="application/json"
    )

    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]
    from controlplane.inventory.models import Site

    assert not Site.objects.exists()


def test_an_expired_token_is_refused_with_401() -> None:
    from datetime import timedelta

    from django.utils import timezone

    issued = api_token_issue(
        name="old", scope="viewer", expires_at=timezone.now() - timedelta(seconds=1)
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")

    assert client.get("/api/v1/sites/").status_code == 401
