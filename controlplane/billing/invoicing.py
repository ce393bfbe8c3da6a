"""Invoice computation: usage grouped by model and price-book version, priced exactly.

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

from django.db.models import Q, QuerySet
from django.db.models.functions import TruncMonth

from controlplane.billing.models import (
    Invoice,
    InvoiceLine,
    LineKind,
    PriceBook,
    Tenant,
    UsageRecord,
)
from controlplane.billing.periods import Period, period_of
from controlplane.billing.pricing import Prices, attainment_pct, line_amounts, total_of
from controlplane.billing.selectors import USAGE_SUMS
from controlplane.core.exceptions import ConflictError


@dataclass(frozen=True)
class InvoiceDraft:
    tenant: Tenant
    period: Period
    currency: str
    lines: list[InvoiceLine]  # unsaved: issuing sets their invoice
    total: Decimal
    saving: Decimal
    sla: dict[str, Any] = field(default_factory=dict)


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


def invoice_compute(
    *, tenant: Tenant, period: Period, records: QuerySet[UsageRecord], late: Q
) -> InvoiceDraft:
    """Price ``records`` per (kind, usage month, model, price-book version); sums in the DB.

    Raises ConflictError naming the model and month when usage is not covered by a price book.
    """
    groups = (
        records.annotate(month=TruncMonth("time"))
        .values("month", "model")
        .annotate(**USAGE_SUMS)
        .order_by("month", "model")
    )
    lines: list[InvoiceLine] = []  # unsaved: issuing sets their invoice
    for group in groups:
        month = period_of(group["month"])
        kind = LineKind.USAGE if month.start == period.start else LineKind.ADJUSTMENT
        scope = records.filter(model=group["model"], time__gte=month.start, time__lt=month.end)
        if kind == LineKind.ADJUSTMENT:
            scope = scope.filter(late)
        covered = 0
        for book in _books_for(group["model"], tenant.currency, month.start, month.end):
            window = scope.filter(time__gte=book.effective_from)
            if book.effective_to is not None:
                window = window.filter(time__lt=book.effective_to)
            sums = window.aggregate(**USAGE_SUMS)
            if not sums["requests"]:
                continue
            covered += sums["requests"]
            lines.append(_priced(kind, month.label, group["model"], book, sums))
        if covered != group["requests"]:
            raise ConflictError(
                f"No {tenant.currency} price book covers all usage of model "
                f"{group['model']!r} in {month.label}; add one, then fetch again."
            )
    sla: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0, "sla_met": 0})
    for line in lines:
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
        total=total_of([line.amount for line in lines]),
        saving=total_of([line.saving for line in lines]),
        sla=sla_out,
    )


def _priced(
    kind: str, label: str, model: str, book: PriceBook, sums: dict[str, Any]
) -> InvoiceLine:
    prices = Prices(book.miss_input_per_mtok, book.hit_input_per_mtok, book.output_per_mtok)
    tokens = {k: int(sums[k] or 0) for k in ("miss_tokens", "hit_tokens", "output_tokens")}
    amounts = line_amounts(prices, **tokens)
    return InvoiceLine(
        kind=kind,
        usage_period=label,
        model=model,
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
