"""Reads for billing, each narrowed to what the caller may see (tenant-bound billing tokens)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDay, TruncHour, TruncMonth
from django.utils import timezone

from controlplane.billing.models import ApiKey, Invoice, PriceBook, UsageRecord
from controlplane.tenancy.models import Tenant

_TRUNC = {"hour": TruncHour, "day": TruncDay, "month": TruncMonth}
_DIMENSION_COLUMN = {
    "model": "model",
    "site": "site",
    "pipeline": "pipeline",
    "tenant": "tenant__slug",
    "config_version": "config_version",
}


def tenant_list(*, tenant_id: int | None = None) -> QuerySet[Tenant]:
    qs = Tenant.objects.all()
    return qs if tenant_id is None else qs.filter(pk=tenant_id)


def api_key_list(*, tenant_id: int | None = None) -> QuerySet[ApiKey]:
    qs = ApiKey.objects.select_related("tenant")
    return qs if tenant_id is None else qs.filter(tenant_id=tenant_id)


def price_book_list() -> QuerySet[PriceBook]:
    return PriceBook.objects.select_related("model")


def usage_record_list(*, tenant_id: int | None = None) -> QuerySet[UsageRecord]:
    qs = UsageRecord.objects.select_related("tenant")
    return qs if tenant_id is None else qs.filter(tenant_id=tenant_id)


def invoice_get(*, tenant: Tenant, period: str) -> Invoice | None:
    return Invoice.objects.filter(tenant=tenant, period=period).first()


def invoice_list(*, tenant_id: int | None = None) -> QuerySet[Invoice]:
    """Issued invoices with their tenants (drafts are computed, never stored)."""
    qs = Invoice.objects.select_related("tenant")
    return qs if tenant_id is None else qs.filter(tenant_id=tenant_id)


def api_key_hashes_for_gateway() -> dict[str, str]:
    """Active key hashes -> tenant slug, for the gateway's configuration push.

    The gateway hashes a presented key with the same SHA-256 and looks it up in this map, so
    it authenticates without a database round trip per request. Every gateway holds the same
    set: the live keys (``_live_keys``); ``HeldKey`` says when one was in it.
    """
    return dict(_live_keys().values_list("key_hash", "tenant__slug"))


def _live_keys() -> QuerySet[ApiKey]:
    """The keys gateways hold now: not revoked, not expired, of an active tenant."""
    return ApiKey.objects.filter(revoked_at__isnull=True, tenant__is_active=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )


@dataclass(frozen=True)
class HeldKey:
    """A gateway key as ingestion judges a record served under it: whose it is, and when the
    gateways held it (``_live_keys`` at that instant: issued, not yet revoked or expired, and
    its tenant active; a tenant's deactivation is not dated, so an inactive tenant's keys are
    held at no time).

    The key prefix a record names decides whom it bills: a gateway can bill a tenant only for
    requests it served under a key of that tenant it held when the request arrived.
    """

    prefix: str
    tenant_id: int
    tenant_slug: str
    tenant_active: bool
    issued_at: datetime
    withdrawn_at: datetime | None  # revoked or expired, whichever came first

    def held_at(self, when: datetime, *, grace: timedelta) -> bool:
        """Whether gateways held the key at ``when``, a time on a gateway's clock: ``grace``
        allows for that clock's skew (and for the config push that drops a withdrawn key)."""
        if not self.tenant_active or when < self.issued_at - grace:
            return False
        return self.withdrawn_at is None or when < self.withdrawn_at + grace


def held_keys(prefixes: set[str]) -> dict[str, HeldKey]:
    """The keys of ``prefixes`` that exist, by prefix (one query)."""
    rows = ApiKey.objects.filter(prefix__in=prefixes).values_list(
        "prefix", "tenant_id", "tenant__slug", "tenant__is_active", "created_at", "revoked_at",
        "expires_at",
    )  # fmt: skip
    out = {}
    for prefix, tenant_id, slug, active, created, revoked, expires in rows:
        ends = [t for t in (revoked, expires) if t is not None]
        out[prefix] = HeldKey(prefix, tenant_id, slug, active, created, min(ends, default=None))
    return out


def next_api_key_expiry() -> datetime | None:
    """When the next live key expires (the gateways' key set changes then), or None."""
    found: datetime | None = (
        _live_keys().filter(expires_at__isnull=False).aggregate(m=Min("expires_at"))["m"]
    )
    return found


def usage_filtered(
    *, tenant_id: int | None, start: datetime, end: datetime, model: str | None = None
) -> QuerySet[UsageRecord]:
    qs = UsageRecord.objects.filter(time__gte=start, time__lt=end)
    if tenant_id is not None:
        qs = qs.filter(tenant_id=tenant_id)
    if model:
        qs = qs.filter(model=model)
    return qs


def usage_fingerprint(qs: QuerySet[UsageRecord], params: str) -> str:
    """A cheap ETag: records are append-only, so (count, max id) of the filter names the data."""
    stats = qs.aggregate(n=Count("id"), last=Max("id"))
    raw = f"{params}|{stats['n']}|{stats['last']}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


USAGE_SUMS = {
    "requests": Count("id"),
    "miss_tokens": Sum("miss_tokens"),
    "hit_tokens": Sum("hit_tokens"),
    "output_tokens": Sum("output_tokens"),
    "sla_met_requests": Count("id", filter=Q(sla_met=True)),
}


def usage_aggregate(
    qs: QuerySet[UsageRecord], *, bucket: str | None, dimensions: tuple[str, ...]
) -> list[dict[str, Any]]:
    """GROUP BY in the database: one row per time bucket and dimension values."""
    keys: list[str] = []
    if bucket is not None:
        qs = qs.annotate(bucket=_TRUNC[bucket]("time"))
        keys.append("bucket")
    annotations = {f"d_{d}": _column(d) for d in dimensions}
    qs = qs.annotate(**annotations) if annotations else qs
    keys += list(annotations)
    rows = (
        # Nulls first on every database (a null config version: usage before any plan).
        qs.values(*keys)
        .annotate(**USAGE_SUMS)
        .order_by(*[F(k).asc(nulls_first=True) for k in keys])
        if keys
        else [qs.aggregate(**USAGE_SUMS)]
    )
    out = []
    for row in rows:
        item: dict[str, Any] = {}
        if bucket is not None:
            item["bucket"] = row["bucket"]
        for d in dimensions:
            item[d] = row[f"d_{d}"]
        for name in USAGE_SUMS:
            item[name] = row[name] or 0
        item["input_tokens"] = item["miss_tokens"] + item["hit_tokens"]
        out.append(item)
    return out


def _column(dimension: str) -> F:
    return F(_DIMENSION_COLUMN[dimension])
