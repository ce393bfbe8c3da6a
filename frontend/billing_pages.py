"""Billing pages for billing users (and operators): usage, invoices, CSV downloads.

They read what the billing API reads, through the billing app's own selectors and invoicing
(``usage_aggregate``, ``invoice_document``), so a page and the API never disagree:

- ``/billing/``: one tenant's usage in one month by day and model, with the cache-hit saving
  (hit tokens x (miss price - hit price), priced by the book in force at the start of the day;
  the invoice prices to the second), and links to the CSV of every row;
- ``/billing/invoices/``: every tenant's invoices, issued ones and the current month's draft;
- ``/billing/invoices/<tenant>/<YYYY-MM>/``: one invoice with its lines (the URL ``make demo``
  prints; a browser without a session is sent to the login, then back here).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from controlplane.billing import selectors
from controlplane.billing.invoicing import invoice_document
from controlplane.billing.models import PriceBook
from controlplane.billing.periods import Period, parse_period, period_of
from controlplane.billing.pricing import Prices, line_amounts
from controlplane.core.exceptions import DomainError
from controlplane.tenancy.models import Tenant
from frontend.access import billing_page
from pdd_core.metrics import hit_ratio


def _period(raw: str | None) -> Period:
    if not raw:
        return period_of(timezone.now())
    try:
        return parse_period(raw)
    except ValidationError:
        raise Http404(f"No month {raw!r}: expected YYYY-MM.") from None


def _book_at(books: list[PriceBook], model: str, when: datetime) -> PriceBook | None:
    for book in books:
        if book.model.slug != model or book.effective_from > when:
            continue
        if book.effective_to is None or book.effective_to > when:
            return book
    return None


def usage_rows(tenant: Tenant, period: Period) -> list[dict[str, Any]]:
    """Usage by day and model with each row's cache-hit saving (None where no book prices it)."""
    qs = selectors.usage_filtered(tenant_id=tenant.pk, start=period.start, end=period.end)
    rows = selectors.usage_aggregate(qs, bucket="day", dimensions=("model",))
    books = [b for b in selectors.price_book_list() if b.currency == tenant.currency]
    for row in rows:
        book = _book_at(books, row["model"], row["bucket"])
        row["saving"] = None
        if book is not None:
            prices = Prices(book.miss_input_per_mtok, book.hit_input_per_mtok, book.output_per_mtok)
            row["saving"] = line_amounts(
                prices, miss_tokens=row["miss_tokens"], hit_tokens=row["hit_tokens"],
                output_tokens=row["output_tokens"],
            ).saving  # fmt: skip
        row["hit_share"] = (
            hit_ratio(row["hit_tokens"], row["input_tokens"]) if row["input_tokens"] else None
        )
        row["sla_share"] = row["sla_met_requests"] / row["requests"] if row["requests"] else None
    return rows


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("requests", "miss_tokens", "hit_tokens", "output_tokens", "input_tokens")
    totals: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    totals["saving"] = sum((r["saving"] for r in rows if r["saving"] is not None), Decimal(0))
    totals["hit_share"] = (
        hit_ratio(totals["hit_tokens"], totals["input_tokens"]) if totals["input_tokens"] else None
    )
    return totals


def _csv_links(tenant: Tenant, period: Period) -> dict[str, str]:
    """The billing API's CSV of the month's aggregate rows and of every usage record."""
    span = {"tenant": tenant.slug, "from": period.start.date().isoformat(),
            "to": period.end.date().isoformat(), "format": "csv"}  # fmt: skip
    return {
        "aggregate": f"/api/v1/billing/usage/?{urlencode({**span, 'group_by': 'day,model'})}",
        "records": f"/api/v1/billing/usage-records/?{urlencode(span)}",
    }


@billing_page
def billing_home(request: HttpRequest) -> HttpResponse:
    """One tenant's usage in one month (``?tenant=&period=``), by day and model."""
    tenants = list(selectors.tenant_list())
    chosen = next((t for t in tenants if t.slug == request.GET.get("tenant")), None)
    tenant = chosen or (tenants[0] if tenants else None)
    period = _period(request.GET.get("period"))
    rows = usage_rows(tenant, period) if tenant else []
    context = {
        "tenants": tenants,
        "tenant": tenant,
        "period": period,
        "months": _months(period),
        "rows": rows,
        "totals": _totals(rows),
        "csv": _csv_links(tenant, period) if tenant else None,
        "invoice_url": reverse("billing-invoice", args=[tenant.slug, period.label])
        if tenant
        else None,
    }
    return render(request, "frontend/billing/usage.html", context)


def _months(period: Period, count: int = 12) -> list[str]:
    """This month and the ones before it, for the month picker."""
    labels = []
    current = period_of(timezone.now())
    for _ in range(count):
        labels.append(current.label)
        current = period_of(current.previous_start())
    if period.label not in labels:
        labels.insert(0, period.label)
    return labels


@billing_page
def invoice_list(request: HttpRequest) -> HttpResponse:
    """Per tenant: this month's draft, then its issued invoices, newest first."""
    month = period_of(timezone.now())
    issued = list(selectors.invoice_list())
    tenants = [
        {"tenant": t, "draft": reverse("billing-invoice", args=[t.slug, month.label]),
         "issued": sorted((i for i in issued if i.tenant_id == t.pk),
                          key=lambda i: i.period, reverse=True)}
        for t in selectors.tenant_list()
    ]  # fmt: skip
    return render(request, "frontend/billing/invoices.html", {"tenants": tenants, "month": month})


@billing_page
def invoice_detail(request: HttpRequest, tenant: str, period: str) -> HttpResponse:
    """One invoice, draft or issued, with its lines; an unpriced draft says why."""
    customer = selectors.tenant_list().filter(slug=tenant).first()
    if customer is None:
        raise Http404(f"No tenant {tenant!r}.")
    month = _period(period)
    try:
        document: dict[str, Any] | None = invoice_document(tenant=customer, period=month)
        problem = ""
    except DomainError as exc:
        document, problem = None, exc.message
    context = {
        "tenant": customer,
        "period": month,
        "invoice": document,
        "problem": problem,
        "api_url": f"/api/v1/billing/invoices/{customer.slug}/{month.label}/",
        "usage_url": reverse("billing-home")
        + "?"
        + urlencode({"tenant": customer.slug, "period": month.label}),
    }
    return render(request, "frontend/billing/invoice.html", context)
