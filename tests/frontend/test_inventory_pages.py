"""Inventory pages: operators create, edit and delete with errors beside fields; others can't."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.inventory.models import Link, Site
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "kind", ["sites", "chip-models", "links", "model-profiles", "instance-pools"]
)
def test_every_kind_lists_for_operator_with_controls(browser_operator: Client, kind: str) -> None:
    factories.pool()
    factories.link()

    response = browser_operator.get(f"/inventory/{kind}/")

    assert response.status_code == 200
    assert b'id="create"' in response.content


def test_operator_creates_a_site(browser_operator: Client) -> None:
    response = browser_operator.post("/inventory/sites/new/", {"slug": "dc-x", "name": "DC X"})

    assert response.status_code == 302
    assert Site.objects.filter(slug="dc-x", name="DC X").exists()


def test_negative_bandwidth_shows_error_beside_field_and_writes_nothing(
    browser_operator: Client,
) -> None:
    a, b = factories.site(), factories.site()

    response = browser_operator.post(
        "/inventory/links/new/",
        {
            "slug": "bad",
            "kind": "wan",
            "source": a.pk,
            "target": b.pk,
            "bandwidth_gbps": "-3",
            "rtt_ms": "10",
            "jitter_ms": "0",
            "bandwidth_jitter": "0",
        },
    )

    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors["bandwidth_gbps"] == ["must be a positive finite number, got -3.0"]
    assert b'id="field-bandwidth_gbps"' in response.content
    assert Link.objects.count() == 0


def test_wan_link_to_same_site_shows_error_on_target(browser_operator: Client) -> None:
    a = factories.site()

    response = browser_operator.post(
        "/inventory/links/new/",
        {
            "slug": "loop",
            "kind": "wan",
            "source": a.pk,
            "target": a.pk,
            "bandwidth_gbps": "10",
            "rtt_ms": "1",
            "jitter_ms": "0",
            "bandwidth_jitter": "0",
        },
    )

    assert response.context["form"].errors["target"] == ["A WAN link joins two different sites."]
    assert Link.objects.count() == 0


def test_operator_edits_a_site(browser_operator: Client) -> None:
    factories.site(slug="e1", name="E1")

    browser_operator.post("/inventory/sites/e1/edit/", {"slug": "e1", "name": "E1", "region": "eu"})

    assert Site.objects.get(slug="e1").region == "eu"


def test_deleting_a_site_in_use_is_refused_with_a_message(browser_operator: Client) -> None:
    pool = factories.pool(slug="in-use")

    response = browser_operator.post(f"/inventory/sites/{pool.site.slug}/delete/", follow=True)

    assert Site.objects.filter(pk=pool.site.pk).exists()
    assert any("in-use" in str(m) for m in response.context["messages"])


def test_viewer_sees_no_controls_and_is_refused(viewer_browser: Client) -> None:
    factories.site(slug="keep")

    listing = viewer_browser.get("/inventory/sites/")
    create = viewer_browser.post("/inventory/sites/new/", {"slug": "new", "name": "New"})
    delete = viewer_browser.post("/inventory/sites/keep/delete/")

    assert listing.status_code == 200
    assert b'id="create"' not in listing.content
    assert (create.status_code, delete.status_code) == (403, 403)
    assert list(Site.objects.values_list("slug", flat=True)) == ["keep"]


def test_unknown_kind_is_404(browser_operator: Client) -> None:
    assert browser_operator.get("/inventory/nope/").status_code == 404
