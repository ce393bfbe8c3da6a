"""Invoice computation: usage grouped by model, config version and price-book version, priced
exactly. A line per config version lets billing see, on one invoice, the requests served before
and after a plan was activated (``UsageRecord.config_version``; null: before any plan).

Usage no price book covers is a flagged line of its own (no price book, no amount), never a
reason to refuse the invoice: one record of a model without prices must not block a tenant's
billing. Issuing leaves those records unbilled, so once a price book covers them they are billed
as adjustment lines of the next issued invoice.

Closing rule: a period is issued (closed) only when an operator issues it, after the month has
ended (``services.invoice_issue``). Until then ``GET`` answers a draft computed from the
records not yet billed. Issuing claims the records (``UsageRecord.invoice``) in one UPDATE, so
a record ingested a moment later stays unbilled and, being in a closed period, lands as an
``adjustment`` line on the tenant's next issued invoice. Issued invoices are never recomputed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, QuerySet
from django.db.models.functions import TruncMonth

from controlplane.billing.models import (
    Invoice,
    InvoiceLine,
    LineKind,
    PriceBook,
    UsageRecord,
)
from controlplane.billing.periods import Period, period_of
from controlplane.billing.pricing import Prices, attainment_pct, line_amounts, total_of
from controlplane.billing.selectors import USAGE_SUMS, invoice_get
from controlplane.tenancy.models import Tenant


@dataclass(frozen=True)
class InvoiceDraft:
    tenant: Tenant
    period: Period
    currency: str
    lines: list[InvoiceLine]  # unsaved: issuing sets their invoice
    total: Decimal
    saving: Decimal
    sla: dict[str, Any] = field(default_factory=dict)
    # The records of the unpriced lines: issuing leaves them unbilled (``services``).
    unpriced: list[QuerySet[UsageRecord]] = field(default_factory=list)


def unbilled_for(tenant: Tenant, period: Period) -> tuple[QuerySet[UsageRecord], Q]:
    """Unbilled records the invoice of ``period`` takes: its own, and late ones of issued
    earlier periods. Returns the queryset and the Q that marks the late ones."""
    issued = Invoice.objects.filter(tenant=tenant, period__lt=period.label).values_list(
        "period", flat=True
    )
    late = Q(pk__in=[])
    for label in issued:
        earlier = period_of(datetime.strptime(label, "%Y-%m"))
        late |= Q(time__gte=earlier.start, time__lt=earlier.end)
    own = Q(time__gte=period.start, time__lt=period.end)
    qs = UsageRecord.objects.filter(tenant=tenant, invoice__isnull=True).filter(own | late)
    return qs, late


def _books_for(model: str, currency: str, start: datetime, end: datetime) -> list[PriceBook]:
    return list(
        PriceBook.objects.filter(model__slug=model, currency=currency, effective_from__lt=end)
        .filter(Q(effective_to__isnull=True) | Q(effective_to__gt=start))
        .order_by("effective_from")
    )


def _in_force(book: PriceBook) -> Q:
    """The usage times ``book`` prices."""
    window = Q(time__gte=book.effective_from)
    return window & Q(time__lt=book.effective_to) if book.effective_to is not None else window


def invoice_compute(
    *, tenant: Tenant, period: Period, records: QuerySet[UsageRecord], late: Q
) -> InvoiceDraft:
    """Price ``records`` per (kind, usage month, model, config version, price-book version);
    sums in the DB.

    Usage that no price book of the tenant's currency covers never blocks the invoice: it is
    one flagged line per (kind, month, model, config version) without a price book or amounts
    (``price_book``
    None), outside the total and the SLA figures, and ``unpriced`` holds its records.
    """
    groups = (
        records.annotate(month=TruncMonth("time"))
        .values("month", "model", "config_version")
        .annotate(**USAGE_SUMS)
        .order_by("month", "model", F("config_version").asc(nulls_first=True))
    )
    lines: list[InvoiceLine] = []  # unsaved: issuing sets their invoice
    unpriced: list[QuerySet[UsageRecord]] = []
    for group in groups:
        month = period_of(group["month"])
        kind = LineKind.USAGE if month.start == period.start else LineKind.ADJUSTMENT
        version = group["config_version"]
        # ``config_version=None`` is ``IS NULL`` in Django: usage before any plan.
        scope = records.filter(model=group["model"], config_version=version,
                               time__gte=month.start, time__lt=month.end)  # fmt: skip
        if kind == LineKind.ADJUSTMENT:
            scope = scope.filter(late)
        covered, priced = Q(pk__in=[]), 0
        for book in _books_for(group["model"], tenant.currency, month.start, month.end):
            covered |= _in_force(book)
            sums = scope.filter(_in_force(book)).aggregate(**USAGE_SUMS)
            if sums["requests"]:
                priced += sums["requests"]
                lines.append(_line(kind, month.label, group["model"], book, sums,
                                   config_version=version))  # fmt: skip
        if priced != group["requests"]:
            left = scope.exclude(covered)
            lines.append(_line(kind, month.label, group["model"], None,
                               left.aggregate(**USAGE_SUMS), config_version=version))  # fmt: skip
            unpriced.append(left)
    billed = [line for line in lines if line.price_book is not None]
    sla: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0, "sla_met": 0})
    for line in billed:
        sla[line.model]["requests"] += line.requests
        sla[line.model]["sla_met"] += line.sla_met_requests
    sla_out = {
        m: {**v, "attainment_pct": str(attainment_pct(v["sla_met"], v["requests"]))}
        for m, v in sorted(sla.items())
    }
    return InvoiceDraft(
        tenant=tenant,
        period=period,
        currency=tenant.currency,
        lines=lines,
        total=total_of([line.amount for line in billed]),
        saving=total_of([line.saving for line in billed]),
        sla=sla_out,
        unpriced=unpriced,
    )


def _line(
    kind: str,
    label: str,
    model: str,
    book: PriceBook | None,
    sums: dict[str, Any],
    *,
    config_version: int | None,
) -> InvoiceLine:
    """A line of ``sums`` priced at ``book``, or the flagged unpriced line (zero amounts)."""
    tokens = {k: int(sums[k] or 0) for k in ("miss_tokens", "hit_tokens", "output_tokens")}
    zero = Prices(Decimal(0), Decimal(0), Decimal(0))
    prices = (
        zero
        if book is None
        else Prices(book.miss_input_per_mtok, book.hit_input_per_mtok, book.output_per_mtok)
    )
    amounts = line_amounts(prices, **tokens)
    return InvoiceLine(
        kind=kind,
        usage_period=label,
        model=model,
        config_version=config_version,
        price_book=book,
        requests=sums["requests"],
        sla_met_requests=sums["sla_met_requests"],
        **tokens,
        miss_amount=amounts.miss_amount,
        hit_amount=amounts.hit_amount,
        output_amount=amounts.output_amount,
        amount=amounts.amount,
        saving=amounts.saving,
    )


def issued_document(invoice: Invoice) -> dict[str, Any]:
    """A stored invoice as the API and the billing pages show it (its lines with their price
    books)."""
    lines: list[InvoiceLine] = list(invoice.lines.select_related("price_book"))
    return {
        "tenant": invoice.tenant, "period": invoice.period, "status": "issued",
        "issued_at": invoice.issued_at, "currency": invoice.currency, "lines": lines,
        "total": invoice.total, "saving": invoice.saving, "sla": invoice.sla,
    }  # fmt: skip


def invoice_document(*, tenant: Tenant, period: Period) -> dict[str, Any]:
    """A tenant's invoice for a month: the stored one once issued, else a draft of the records
    not yet billed (``invoice_compute``: unpriced usage is a flagged line)."""
    issued = invoice_get(tenant=tenant, period=period.label)
    if issued is not None:
        return issued_document(issued)
    records, late = unbilled_for(tenant, period)
    draft = invoice_compute(tenant=tenant, period=period, records=records, late=late)
    shown = {k: v for k, v in draft.__dict__.items() if k != "unpriced"}  # querysets, for issuing
    return {**shown, "period": period.label, "status": "draft", "issued_at": None}
