"""Log in through the real login form and see the seeded inventory in Chromium."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operator_logs_in_and_sees_the_demo_inventory(live_server_url: str, page: Any) -> None:
    call_command(
        "seed_demo", "--operator", "ops", "--password", "ops-pass-123", stdout=io.StringIO()
    )

    log_in(page, live_server_url, "ops", "ops-pass-123")
    page.goto(f"{live_server_url}/topology/")  # the inventory at a glance moved off "/"

    assert page.inner_text("#site-dc-a h2").startswith("Datacenter A")
    assert "b-main" in page.inner_text("#site-dc-b")
    assert "dc-a-dc-b" in page.inner_text("#links")
    page.click("header.top nav >> text=Catalogue")  # the chips and models have their own page
    assert page.locator("#chips tbody tr").count() >= 14
    color = page.eval_on_selector("header.top", "e => getComputedStyle(e).backgroundColor")
    assert color == "rgb(255, 255, 255)"  # the stylesheet loaded
    assert screenshot(page, "inventory").stat().st_size > 10_000


def test_wrong_password_stays_on_login(live_server_url: str, page: Any) -> None:
    call_command(
        "seed_demo", "--operator", "ops", "--password", "ops-pass-123", stdout=io.StringIO()
    )

    page.goto(f"{live_server_url}/accounts/login/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")

    assert "didn't match" in page.inner_text(".error")
    page.goto(f"{live_server_url}/")
    assert "/accounts/login/" in page.url


def test_link_form_shows_the_error_beside_the_field(live_server_url: str, page: Any) -> None:
    from controlplane.inventory.models import Link

    call_command(
        "seed_demo", "--operator", "ops", "--password", "ops-pass-123", stdout=io.StringIO()
    )
    log_in(page, live_server_url, "ops", "ops-pass-123")

    page.goto(f"{live_server_url}/inventory/links/new/")
    page.fill("#id_slug", "a-b-2")
    page.select_option("#id_kind", "wan")
    page.select_option("#id_source", label="Datacenter A")
    page.select_option("#id_target", label="Datacenter B")
    page.fill("#id_bandwidth_gbps", "-10")
    page.fill("#id_rtt_ms", "15")
    page.click("form.form button[type=submit]")

    error = page.inner_text("#field-bandwidth_gbps .error")
    assert error == "must be a positive finite number, got -10.0"
    screenshot(page, "inventory-link-error")
    assert not Link.objects.filter(slug="a-b-2").exists()
