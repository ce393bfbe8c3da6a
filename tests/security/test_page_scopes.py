"""Pages follow the API's scopes: operators and viewers read them, a billing user gets 403."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests import factories

pytestmark = pytest.mark.django_db

PAGES = [
    "/", "/topology/", "/alerts/", "/plans/", "/inventory/sites/", "/inventory/chip-models/",
    "/inventory/sites/new/",
]  # fmt: skip


def _browser(django_user_model: Any, group: str | None) -> Client:
    user = django_user_model.objects.create_user(f"u-{group}", password="pw-123456-x")
    if group is not None:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("path", PAGES)
def test_a_billing_user_is_refused_every_operator_page(django_user_model: Any, path: str) -> None:
    response = _browser(django_user_model, "billing").get(path)

    assert response.status_code == 403


@pytest.mark.parametrize("path", ["/", "/topology/", "/alerts/", "/plans/", "/inventory/sites/"])
def test_a_viewer_reads_the_operator_pages(django_user_model: Any, path: str) -> None:
    response = _browser(django_user_model, "viewer").get(path)

    assert response.status_code == 200


def test_a_billing_user_cannot_open_a_plan_or_edit_inventory(django_user_model: Any) -> None:
    site = factories.site(slug="dc-a")
    browser = _browser(django_user_model, "billing")

    edit = browser.post(f"/inventory/sites/{site.slug}/delete/")
    plan = browser.get("/plans/1/")

    assert (edit.status_code, plan.status_code) == (403, 403)
    assert factories.Site.objects.filter(slug="dc-a").exists()
