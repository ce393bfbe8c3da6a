"""Pages follow the API's scopes: operators and viewers read the operator pages, billing users
and operators the billing pages; anyone else gets 403, and a billing user starts on billing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests import factories

pytestmark = pytest.mark.django_db

PAGES = [
    "/topology/", "/alerts/", "/plans/", "/inventory/sites/", "/inventory/chip-models/",
    "/inventory/sites/new/", "/catalogue/",
]  # fmt: skip
BILLING_PAGES = ["/billing/", "/billing/invoices/", "/billing/invoices/acme/2026-01/"]


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


def test_a_billing_user_starts_on_the_billing_pages(django_user_model: Any) -> None:
    response = _browser(django_user_model, "billing").get("/")

    assert response.status_code == 302
    assert response["Location"] == "/billing/"


@pytest.mark.parametrize("path", ["/", "/topology/", "/alerts/", "/plans/", "/inventory/sites/"])
def test_a_viewer_reads_the_operator_pages(django_user_model: Any, path: str) -> None:
    response = _browser(django_user_model, "viewer").get(path)

    assert response.status_code == 200


@pytest.mark.parametrize("group", ["billing", "operator"])
@pytest.mark.parametrize("path", BILLING_PAGES)
def test_billing_users_and_operators_read_the_billing_pages(
    django_user_model: Any, group: str, path: str
) -> None:
    factories.tenant(slug="acme", name="Acme")

    response = _browser(django_user_model, group).get(path)

    assert response.status_code == 200


@pytest.mark.parametrize("path", BILLING_PAGES)
def test_a_viewer_is_refused_the_billing_pages(django_user_model: Any, path: str) -> None:
    factories.tenant(slug="acme", name="Acme")

    response = _browser(django_user_model, "viewer").get(path)

    assert response.status_code == 403


@pytest.mark.parametrize(
    ("group", "shown", "hidden"),
    [
        ("billing", ["Billing", "API"], ["Overview", "Topology", "Alerts", "Plans", "Inventory"]),
        ("viewer", ["Overview", "Topology", "Plans", "API"], ["Billing"]),
        ("operator", ["Overview", "Billing", "Inventory", "API"], []),
    ],
)
def test_the_navigation_shows_only_what_the_user_may_open(
    django_user_model: Any, group: str, shown: list[str], hidden: list[str]
) -> None:
    browser = _browser(django_user_model, group)
    page = browser.get("/billing/invoices/" if group == "billing" else "/topology/")
    nav = page.content.decode().split('<nav class="sections"')[1].split("</nav>")[0]

    assert [label for label in shown if f">{label}</a>" in nav] == shown
    assert [label for label in hidden if f">{label}</a>" in nav] == []


def test_the_403_page_leads_a_billing_user_to_the_billing_pages(django_user_model: Any) -> None:
    response = _browser(django_user_model, "billing").get("/topology/")

    assert response.status_code == 403
    html = response.content.decode()
    assert 'id="go-home" href="/billing/"' in html
    assert ">Topology</a>" not in html


def test_a_billing_user_cannot_open_a_plan_or_edit_inventory(django_user_model: Any) -> None:
    site = factories.site(slug="dc-a")
    browser = _browser(django_user_model, "billing")

    edit = browser.post(f"/inventory/sites/{site.slug}/delete/")
    plan = browser.get("/plans/1/")

    assert (edit.status_code, plan.status_code) == (403, 403)
    assert factories.Site.objects.filter(slug="dc-a").exists()
