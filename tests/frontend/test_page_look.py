"""What a person sees around the pages: styled error pages, a favicon, headers with units."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests import factories

pytestmark = pytest.mark.django_db


def test_a_missing_page_is_the_styled_404_with_the_path_and_the_way_back(
    browser_operator: Client,
) -> None:
    response = browser_operator.get("/no/such/page/")

    assert response.status_code == 404
    html = response.content.decode()
    assert '<p class="status">404</p>' in html
    assert "<code>/no/such/page/</code>" in html
    assert 'href="/"' in html
    assert "frontend/site.css" in html


def test_an_unknown_inventory_kind_is_the_styled_404(browser_operator: Client) -> None:
    response = browser_operator.get("/inventory/gpus/")

    assert response.status_code == 404
    assert '<p class="status">404</p>' in response.content.decode()


def test_an_api_404_keeps_the_json_envelope(browser_operator: Client) -> None:
    response = browser_operator.get("/api/v1/nothing-here/")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_500_page_renders_without_a_request_or_database() -> None:
    from django.template import loader

    html = loader.get_template("500.html").render({})

    assert '<p class="status">500</p>' in html
    assert "frontend/site.css" in html


def test_the_favicon_is_named_by_pages_and_served_at_its_usual_address(
    browser_operator: Client, client: Client
) -> None:
    page = browser_operator.get("/topology/").content.decode()
    icon = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">', page)

    assert icon is not None
    assert icon.group(1) == "/static/frontend/favicon.svg"
    redirect = client.get("/favicon.ico")
    assert redirect.status_code == 301
    assert redirect["Location"] == "/static/frontend/favicon.svg"


@pytest.mark.parametrize(
    ("kind", "headers"),
    [
        ("chip-models", ["Slug", "Name", "BF16 dense (TFLOP/s)", "HBM (GiB)",
                         "HBM bandwidth (TB/s)", "Price ($ per chip-hour)"]),
        ("links", ["Slug", "Kind", "Source site", "Target site", "Bandwidth (Gbit/s)",
                   "Round trip (ms)", "Jitter (ms)"]),
        ("model-profiles", ["Slug", "Name", "Attention", "Parameters (billions)",
                            "Active parameters (billions)", "KV cache (bytes per token)"]),
        ("instance-pools", ["Slug", "Site", "Role", "Chip", "Model", "Chips per instance (TP)",
                            "Instances"]),
    ],
)  # fmt: skip
def test_inventory_headers_are_words_with_units(
    browser_operator: Client, kind: str, headers: list[str]
) -> None:
    factories.pool()
    factories.link()

    html = browser_operator.get(f"/inventory/{kind}/").content.decode()
    thead = html[html.index("<thead>") : html.index("</thead>")]
    cells = [re.sub(r"<[^>]+>", "", th).strip() for th in re.findall(r"<th>(.*?)</th>", thead)]

    assert [c for c in cells if c] == headers


@pytest.mark.parametrize(
    ("kind", "some_labels"),
    [
        ("links", ["Source site", "Bandwidth (Gbit/s)", "Round trip (ms)",
                   "Bandwidth jitter (coefficient of variation)", "Transfer cost ($ per GB)"]),
        ("chip-models", ["Scale-up bandwidth (GB/s)", "Scale-out NIC (Gbit/s)",
                         "Compute efficiency (fraction of peak)", "Source"]),
        ("model-profiles", ["KV heads", "Context window (tokens)",
                            "MoE experts per token (top-k)"]),
    ],
)  # fmt: skip
def test_inventory_forms_label_fields_in_words_with_units(
    browser_operator: Client, kind: str, some_labels: list[str]
) -> None:
    html = browser_operator.get(f"/inventory/{kind}/new/").content.decode()
    found = [re.sub(r"<[^>]+>", "", label).strip() for label in
             re.findall(r"<label[^>]*>(.*?)</label>", html, re.S)]  # fmt: skip

    assert set(some_labels) <= set(found), found
    assert not [text for text in found if "_" in text or text.endswith(("gbps", " ms", " gb"))]
