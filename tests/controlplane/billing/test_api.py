"""Billing REST: the permission matrix, tenant isolation, usage aggregates with ETag and CSV,
cursor pages, malformed input, price-book versions and API keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controlplane.billing.models import ApiKey, PriceBook
from controlplane.billing.selectors import api_key_hashes_for_gateway
from controlplane.tenancy.models import Tenant
from pdd_core.keys import hash_key

USAGE = "/api/v1/billing/usage/?from=2025-01-01&to=2025-02-01"


@pytest.mark.parametrize(
    ("persona", "read", "write"),
    [
        ("operator", 200, 201),
        ("billing_client", 200, 403),
        ("viewer", 403, 403),
        ("agent", 403, 403),
        ("outsider", 401, 401),
        ("anonymous", 401, 401),
    ],
)
def test_permission_matrix(
    request: pytest.FixtureRequest, world: Any, persona: str, read: int, write: int
) -> None:
    client = request.getfixturevalue(persona)

    reads = {
        url: client.get(url).status_code
        for url in ("/api/v1/billing/tenants/", "/api/v1/billing/api-keys/",
                    "/api/v1/billing/price-books/", "/api/v1/billing/usage-records/", USAGE,
                    "/api/v1/billing/invoices/acme/2025-01/")
    }  # fmt: skip
    got_write = client.post("/api/v1/billing/tenants/", {"slug": "new", "name": "New"})

    assert set(reads.values()) == {read}, reads
    assert got_write.status_code == write
    assert Tenant.objects.filter(slug="new").exists() is (write == 201)


def test_billing_token_cannot_write_anything(billing_client: Any, world: Any) -> None:
    book = world["book"]

    responses = [
        billing_client.patch(f"/api/v1/billing/price-books/{book.pk}/", {"output_per_mtok": "1"}),
        billing_client.delete("/api/v1/billing/tenants/acme/"),
        billing_client.post("/api/v1/billing/api-keys/", {"tenant": "acme", "name": "k"}),
        billing_client.post("/api/v1/sites/", {"slug": "s", "name": "S"}),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403, 403]
    book.refresh_from_db()
    assert str(book.output_per_mtok) == "8.000000"
    assert Tenant.objects.filter(slug="acme").exists()
    assert list(ApiKey.objects.order_by("prefix").values_list("prefix", flat=True)) == world["keys"]


def test_tenant_bound_token_sees_only_its_tenant(
    client_for: Callable[..., Any], world: Any
) -> None:
    acme_only = client_for("billing", tenant=world["acme"])

    tenants = acme_only.get("/api/v1/billing/tenants/").json()
    records = acme_only.get("/api/v1/billing/usage-records/?from=2025-01-01").json()
    usage = acme_only.get(USAGE + "&group_by=tenant").json()

    assert [t["slug"] for t in tenants["results"]] == ["acme"]
    assert {r["tenant"] for r in records["results"]} == {"acme"}
    assert [row["tenant"] for row in usage["results"]] == ["acme"]
    for url in ("/api/v1/billing/tenants/globex/", "/api/v1/billing/invoices/globex/2025-01/",
                USAGE + "&tenant=globex", "/api/v1/billing/usage-records/?tenant=globex",
                "/api/v1/billing/tenants/nobody/"):  # fmt: skip
        response = acme_only.get(url)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"


def test_unbound_billing_token_sees_every_tenant(billing_client: Any, world: Any) -> None:
    usage = billing_client.get(USAGE + "&group_by=tenant").json()

    assert [(r["tenant"], r["requests"]) for r in usage["results"]] == [("acme", 3), ("globex", 1)]


def test_usage_by_day_is_aggregated_per_bucket(billing_client: Any, world: Any) -> None:
    response = billing_client.get(USAGE + "&tenant=acme&group_by=day")

    assert response.status_code == 200
    body = response.json()
    assert (body["tenant"], body["group_by"]) == ("acme", ["day"])
    assert [(r["bucket"], r["requests"], r["hit_tokens"], r["miss_tokens"], r["sla_met_requests"])
            for r in body["results"]] == [
        ("2025-01-10T00:00:00Z", 1, 900, 100, 1),
        ("2025-01-11T00:00:00Z", 2, 900, 1100, 1),
    ]  # fmt: skip


def test_usage_by_day_and_model(billing_client: Any, world: Any) -> None:
    body = billing_client.get(USAGE + "&group_by=model").json()

    assert body["results"] == [{"model": "model-x", "requests": 4, "input_tokens": 4000,
                                "miss_tokens": 1300, "hit_tokens": 2700, "output_tokens": 800,
                                "sla_met_requests": 3}]  # fmt: skip


def test_usage_etag_answers_304_until_new_records(
    billing_client: Any, agent: Any, world: Any
) -> None:
    from tests import factories

    first = billing_client.get(USAGE)
    etag = first["ETag"]
    same = billing_client.get(USAGE, HTTP_IF_NONE_MATCH=etag)
    agent.post("/api/v1/telemetry/records/", {"records": [factories.request_record()]},
               format="json")  # fmt: skip
    changed = billing_client.get(USAGE, HTTP_IF_NONE_MATCH=etag)

    assert first.status_code == 200
    assert same.status_code == 304
    assert same["ETag"] == etag
    assert changed.status_code == 200
    assert changed["ETag"] != etag


def test_usage_csv_two_ways(billing_client: Any, world: Any) -> None:
    by_param = billing_client.get(USAGE + "&tenant=acme&format=csv")
    by_path = billing_client.get(
        "/api/v1/billing/usage.csv?from=2025-01-01&to=2025-02-01&tenant=acme"
    )

    assert by_param["Content-Type"].startswith("text/csv")
    assert by_param.content == by_path.content
    lines = by_param.content.decode().splitlines()
    assert lines[0] == ("bucket,requests,input_tokens,miss_tokens,hit_tokens,output_tokens,"
                        "sla_met_requests")  # fmt: skip
    assert lines[1] == "2025-01-10T00:00:00Z,1,1000,100,900,200,1"
    assert len(lines) == 3


def test_raw_records_cursor_pages_cover_all_once(billing_client: Any, world: Any) -> None:
    seen: list[str] = []
    url: str | None = "/api/v1/billing/usage-records/?from=2025-01-01&page_size=3"
    while url:
        body = billing_client.get(url).json()
        seen += [r["request_id"] for r in body["results"]]
        url = body["next"]

    assert seen == ["a1", "a2", "a3", "g1"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("from=yesterday", "from: Expected an ISO date or date-time"),
        ("from=2025-02-30", "from: Expected an ISO date or date-time"),
        ("to=2025-13-01", "to: Expected an ISO date or date-time"),
        ("from=2025-02-01&to=2025-01-01", "to: Must be after 'from'."),
        ("group_by=week", "group_by: Use a comma-separated subset of"),
        ("group_by=day,hour", "group_by: At most one of hour, day, month."),
        ("group_by=hour&from=2024-01-01&to=2025-01-01", "group_by: Hourly buckets span"),
    ],
)
def test_malformed_usage_query_is_400_naming_the_parameter(
    billing_client: Any, world: Any, query: str, message: str
) -> None:
    response = billing_client.get(f"/api/v1/billing/usage/?{query}")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(message)


def test_price_book_used_by_issued_invoice_is_never_edited(operator: Any, world: Any) -> None:
    book = world["book"]
    operator.post("/api/v1/billing/invoices/acme/2025-01/issue/")

    edit = operator.patch(f"/api/v1/billing/price-books/{book.pk}/", {"miss_input_per_mtok": "3"})
    delete = operator.delete(f"/api/v1/billing/price-books/{book.pk}/")
    too_early = operator.patch(f"/api/v1/billing/price-books/{book.pk}/",
                               {"effective_to": "2025-01-15T00:00:00Z"})  # fmt: skip
    end = operator.patch(f"/api/v1/billing/price-books/{book.pk}/",
                         {"effective_to": "2025-03-01T00:00:00Z"})  # fmt: skip
    new = operator.post("/api/v1/billing/price-books/", {
        "model": "model-x", "currency": "USD", "miss_input_per_mtok": "3.00",
        "hit_input_per_mtok": "0.30", "output_per_mtok": "9.00",
        "effective_from": "2025-03-01T00:00:00Z"})  # fmt: skip

    assert edit.status_code == 409
    assert "create a new version" in edit.json()["error"]["message"]
    assert delete.status_code == 409
    assert too_early.status_code == 409
    assert end.status_code == 200
    assert new.status_code == 201, new.json()
    book.refresh_from_db()
    assert str(book.miss_input_per_mtok) == "2.000000"
    assert PriceBook.objects.count() == 2


def test_overlapping_or_inverted_price_book_is_400(operator: Any, world: Any) -> None:
    base = {"model": "model-x", "currency": "USD", "miss_input_per_mtok": "1",
            "hit_input_per_mtok": "0.1", "output_per_mtok": "2"}  # fmt: skip

    overlap = operator.post("/api/v1/billing/price-books/",
                            {**base, "effective_from": "2024-06-01T00:00:00Z"})  # fmt: skip
    inverted = operator.post("/api/v1/billing/price-books/", {
        **base, "currency": "EUR", "hit_input_per_mtok": "5",
        "effective_from": "2024-06-01T00:00:00Z"})  # fmt: skip

    assert overlap.status_code == 400
    assert overlap.json()["error"]["message"].startswith("effective_from: Overlaps price book")
    assert inverted.status_code == 400
    assert "hit_input_per_mtok" in inverted.json()["error"]["fields"]
    assert PriceBook.objects.count() == 1


def test_api_key_shown_once_hashed_and_revocable(operator: Any, world: Any) -> None:
    created = operator.post("/api/v1/billing/api-keys/", {"tenant": "acme", "name": "gw"})

    assert created.status_code == 201, created.json()
    secret = created.json()["key"]
    prefix = created.json()["prefix"]
    assert secret.startswith(f"tk_{prefix}_")
    listed = operator.get(f"/api/v1/billing/api-keys/{prefix}/").json()
    assert "key" not in listed
    assert ApiKey.objects.get(prefix=prefix).key_hash == hash_key(secret)
    before = world["key_hashes"]
    assert api_key_hashes_for_gateway() == {**before, hash_key(secret): "acme"}

    revoked = operator.post(f"/api/v1/billing/api-keys/{prefix}/revoke/")

    assert revoked.status_code == 200
    assert revoked.json()["is_active"] is False
    assert api_key_hashes_for_gateway() == before


def test_tenant_bound_token_does_not_see_other_tenants_keys(
    operator: Any, client_for: Callable[..., Any], world: Any
) -> None:
    prefix = operator.post("/api/v1/billing/api-keys/", {"tenant": "globex", "name": "gw"}).json()[
        "prefix"
    ]
    acme_only = client_for("billing", tenant=world["acme"])

    assert acme_only.get(f"/api/v1/billing/api-keys/{prefix}/").status_code == 404
    listed = acme_only.get("/api/v1/billing/api-keys/").json()["results"]
    assert [key["tenant"]["slug"] for key in listed] == ["acme"]  # its factory key only


def test_only_billing_tokens_can_be_bound_to_a_tenant(world: Any) -> None:
    from controlplane.accounts.services import api_token_issue

    with pytest.raises(ValueError, match="only billing tokens"):
        api_token_issue(name="x", scope="operator", tenant=world["acme"])


def test_create_token_command_binds_tenant(world: Any) -> None:
    import io

    from django.core.management import call_command

    from controlplane.accounts.models import ApiToken

    call_command("create_token", "--name", "acme-billing", "--scope", "billing",
                 "--tenant", "acme", stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip

    assert ApiToken.objects.get(name="acme-billing").tenant == world["acme"]


def test_usage_records_list_query_count(
    billing_client: Any, world: Any, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(4):
        response = billing_client.get("/api/v1/billing/usage-records/?from=2025-01-01")

    assert len(response.json()["results"]) == 4
