"""Invoices: lines and totals reconcile with the raw records, cache-hit saving, SLA per model,
issuing closes a month, late records become adjustments, re-posting changes no total."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from controlplane.billing.models import Invoice, InvoiceLine, UsageRecord
from controlplane.inventory.models import ModelProfile
from controlplane.telemetry.services import records_ingest
from tests import factories

URL = "/api/v1/billing/invoices/acme/2025-01/"


def test_draft_invoice_reconciles_with_raw_records(billing_client: Any, world: Any) -> None:
    response = billing_client.get(URL)

    assert response.status_code == 200, response.json()
    body = response.json()
    # a1, a2: 100 miss, 900 hit, 200 out; a3: 1000 miss, 0 hit, 200 out
    assert body["status"] == "draft"
    assert [(x["kind"], x["model"], x["requests"]) for x in body["lines"]] == [
        ("usage", "model-x", 3)
    ]
    line = body["lines"][0]
    assert (line["miss_tokens"], line["hit_tokens"], line["output_tokens"]) == (1200, 1800, 600)
    assert line["miss_amount"] == "0.002400"  # 1200 x 2.00 / 1e6
    assert line["hit_amount"] == "0.000720"  # 1800 x 0.40 / 1e6
    assert line["output_amount"] == "0.004800"  # 600 x 8.00 / 1e6
    assert line["amount"] == "0.007920"
    assert body["total"] == "0.007920"
    assert body["saving"] == "0.002880"  # 1800 x (2.00 - 0.40) / 1e6
    assert body["sla"] == {"model-x": {"requests": 3, "sla_met": 2, "attainment_pct": "66.67"}}
    raw = billing_client.get(
        "/api/v1/billing/usage-records/?tenant=acme&from=2025-01-01&to=2025-02-01"
    )
    assert sum(r["hit_tokens"] for r in raw.json()["results"]) == line["hit_tokens"]
    assert sum(r["miss_tokens"] for r in raw.json()["results"]) == line["miss_tokens"]


def test_reposting_a_batch_changes_no_total(agent: Any, billing_client: Any, world: Any) -> None:
    before = billing_client.get(URL).json()

    again = agent.post("/api/v1/telemetry/records/", {"records": world["records"]}, format="json")

    assert again.json() == {"accepted": 0, "duplicates": 4, "errors": {}}
    assert billing_client.get(URL).json() == before


def test_operator_issues_and_the_invoice_is_stored(operator: Any, world: Any) -> None:
    issued = operator.post(URL + "issue/")

    assert issued.status_code == 201, issued.json()
    assert issued.json()["status"] == "issued"
    assert issued.json()["total"] == "0.007920"
    invoice = Invoice.objects.get(tenant=world["acme"], period="2025-01")
    assert invoice.total == Decimal("0.007920")
    assert invoice.total == sum(line.amount for line in invoice.lines.all())
    assert UsageRecord.objects.filter(tenant=world["acme"], invoice=invoice).count() == 3
    assert operator.post(URL + "issue/").status_code == 409


def test_late_record_becomes_adjustment_on_next_invoice(operator: Any, world: Any) -> None:
    operator.post(URL + "issue/")
    issued_before = operator.get(URL).json()

    late = records_ingest(records=[factories.request_record(
        request_id="late", finish_time="2025-01-31T23:59:00Z", hit_tokens=0, miss_tokens=1000,
        output_tokens=0, rld_tokens=0, md_tokens=0,
    )])  # fmt: skip
    feb = records_ingest(records=[factories.request_record(
        request_id="feb", finish_time="2025-02-02T00:00:00Z", hit_tokens=0, miss_tokens=500,
        input_tokens=500, output_tokens=0, rld_tokens=0, md_tokens=0,
    )])  # fmt: skip
    january = operator.get(URL).json()
    february = operator.post("/api/v1/billing/invoices/acme/2025-02/issue/").json()

    assert (late.accepted, feb.accepted) == (1, 1)
    assert january == issued_before  # the issued invoice did not change
    assert [(x["kind"], x["usage_period"], x["miss_tokens"], x["amount"])
            for x in february["lines"]] == [
        ("adjustment", "2025-01", 1000, "0.002000"),
        ("usage", "2025-02", 500, "0.001000"),
    ]  # fmt: skip
    assert february["total"] == "0.003000"


def test_period_not_ended_cannot_be_issued(operator: Any, world: Any) -> None:
    response = operator.post("/api/v1/billing/invoices/acme/2999-01/issue/")

    assert response.status_code == 409
    assert not Invoice.objects.exists()


def test_an_unknown_model_record_is_refused_and_the_invoice_still_answers_200(
    billing_client: Any, world: Any
) -> None:
    before = billing_client.get(URL).json()

    result = records_ingest(records=[factories.request_record(request_id="ghost", model="ghost"),
                                     factories.request_record(request_id="real")])  # fmt: skip
    response = billing_client.get(URL)

    assert (result.accepted, result.errors) == (1, {0: {"model": [
        "Unknown model 'ghost': add it to the inventory, then replay the record."]}})  # fmt: skip
    assert not UsageRecord.objects.filter(request_id="ghost").exists()
    assert response.status_code == 200
    assert [(x["model"], x["requests"]) for x in response.json()["lines"]] == [("model-x", 4)]
    assert Decimal(response.json()["total"]) > Decimal(before["total"])


def _unpriced_usage() -> None:
    """Two January records of a model the inventory knows but no price book covers."""
    factories.model_profile(slug="unpriced")
    records = [
        factories.request_record(
            request_id=f"u{i}", model="unpriced", finish_time="2025-01-20T00:00:00Z"
        )
        for i in range(2)
    ]
    assert records_ingest(records=records).accepted == 2


def test_usage_no_price_book_covers_is_a_flagged_line_and_the_rest_is_priced(
    billing_client: Any, world: Any
) -> None:
    _unpriced_usage()

    response = billing_client.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert [(x["model"], x["priced"], x["requests"], x["price_book"], x["amount"])
            for x in body["lines"]] == [
        ("model-x", True, 3, world["book"].pk, "0.007920"),
        ("unpriced", False, 2, None, "0.000000"),
    ]  # fmt: skip
    assert body["lines"][1]["miss_input_per_mtok"] is None
    assert (body["lines"][1]["miss_tokens"], body["lines"][1]["output_tokens"]) == (200, 400)
    assert body["total"] == "0.007920"  # the priced usage, exactly as without the other model
    assert list(body["sla"]) == ["model-x"]


def test_issuing_leaves_unpriced_usage_unbilled_until_a_price_book_covers_it(
    operator: Any, world: Any
) -> None:
    _unpriced_usage()

    january = operator.post(URL + "issue/").json()
    factories.price_book(model=ModelProfile.objects.get(slug="unpriced"))
    february = operator.post("/api/v1/billing/invoices/acme/2025-02/issue/").json()

    assert [(x["model"], x["priced"]) for x in january["lines"]] == [
        ("model-x", True), ("unpriced", False),
    ]  # fmt: skip
    assert january["total"] == "0.007920"
    assert set(UsageRecord.objects.filter(request_id__startswith="u").values_list(
        "invoice__period", flat=True)) == {"2025-02"}  # fmt: skip
    assert [(x["kind"], x["usage_period"], x["model"], x["priced"], x["requests"])
            for x in february["lines"]] == [
        ("adjustment", "2025-01", "unpriced", True, 2),
    ]  # fmt: skip


def test_two_price_versions_in_a_month_give_two_lines(billing_client: Any, world: Any) -> None:
    from datetime import UTC, datetime

    book = world["book"]
    book.effective_to = datetime(2025, 1, 11, tzinfo=UTC)
    book.save()
    factories.price_book(model=world["model"], effective_from=datetime(2025, 1, 11, tzinfo=UTC),
                         miss_input_per_mtok=Decimal("4.00"))  # fmt: skip

    body = billing_client.get(URL).json()

    assert [(x["requests"], x["miss_input_per_mtok"]) for x in body["lines"]] == [
        (1, "2.000000"), (2, "4.000000")
    ]  # fmt: skip
    assert Decimal(body["total"]) == sum(Decimal(x["amount"]) for x in body["lines"])


@pytest.mark.parametrize("persona", ["billing_client", "viewer", "agent"])
def test_only_operators_issue(request: pytest.FixtureRequest, world: Any, persona: str) -> None:
    response = request.getfixturevalue(persona).post(URL + "issue/")

    assert response.status_code == 403
    assert not Invoice.objects.exists()
    assert not InvoiceLine.objects.exists()


@pytest.mark.parametrize("period", ["2025-13", "2025-1", "25-01", "abcd-ef", "2025-00"])
def test_malformed_period_is_400_naming_it(billing_client: Any, world: Any, period: str) -> None:
    response = billing_client.get(f"/api/v1/billing/invoices/acme/{period}/")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("period: Expected a month as YYYY-MM")
