"""Writes for billing: tenants (shared helpers), API keys, price-book versions, invoice issue."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from controlplane.billing.invoicing import invoice_compute, unbilled_for
from controlplane.billing.models import ApiKey, Invoice, InvoiceLine, PriceBook, UsageRecord
from controlplane.billing.periods import Period, period_of
from controlplane.core.broadcast import config_changed
from controlplane.core.exceptions import ConflictError
from controlplane.core.services import model_create, model_update, validated_save
from controlplane.tenancy.models import Tenant
from pdd_core.keys import hash_key

API_KEY_PREFIX = "tk"


@transaction.atomic
def tenant_update(tenant: Tenant, data: Mapping[str, Any]) -> Tenant:
    """Edit a tenant; (de)activating it adds or drops its keys on the gateways at once."""
    was_active = tenant.is_active
    tenant = model_update(tenant, data)
    if tenant.is_active != was_active:
        transaction.on_commit(lambda: config_changed("tenant.activation"))
    return tenant


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    secret: str  # the whole key; never stored, shown once


@transaction.atomic
def api_key_create(
    *, tenant: Tenant, name: str, expires_at: datetime | None = None
) -> IssuedApiKey:
    """A new gateway key ``tk_<prefix>_<secret>``, stored hashed with the same SHA-256 as tokens;
    valid until ``expires_at`` when given."""
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": ["Must be in the future."]})
    prefix = secrets.token_hex(4)
    while ApiKey.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    raw = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    key = model_create(
        ApiKey,
        {"tenant": tenant, "name": name, "prefix": prefix, "key_hash": hash_key(raw),
         "expires_at": expires_at},
    )  # fmt: skip
    # Gateways get the new key's hash as soon as it commits.
    transaction.on_commit(lambda: config_changed("api-key.created"))
    return IssuedApiKey(api_key=key, secret=raw)


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke; gateways drop the key's hash as soon as the revocation commits."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
        transaction.on_commit(lambda: config_changed("api-key.revoked"))
    return api_key


def _used_until(book: PriceBook) -> datetime | None:
    """End of the latest issued period billed at ``book``, or None when it was never used."""
    latest = book.lines.aggregate(last=Max("usage_period"))["last"]
    if latest is None:
        return None
    return period_of(datetime.strptime(latest, "%Y-%m")).end


@transaction.atomic
def price_book_create(data: Mapping[str, Any]) -> PriceBook:
    """A new version; the model row is locked so two overlapping versions cannot both pass."""
    from controlplane.inventory.models import ModelProfile

    ModelProfile.objects.select_for_update().filter(pk=data["model"].pk).first()
    return model_create(PriceBook, data)


@transaction.atomic
def price_book_update(book: PriceBook, data: Mapping[str, Any]) -> PriceBook:
    """Edit an unused version freely; of a used one only end it (``effective_to``), and not
    before the end of the last issued period it priced. Anything else is a 409."""
    book = PriceBook.objects.select_for_update().get(pk=book.pk)
    used_until = _used_until(book)
    if used_until is not None:
        changed = {k for k, v in data.items() if getattr(book, k if k != "model" else "model") != v}
        if changed - {"effective_to"}:
            raise ConflictError(
                f"Price book {book.pk} is used by an issued invoice and is never edited in "
                f"place; create a new version (and set effective_to on this one) instead. "
                f"Refused changes: {', '.join(sorted(changed - {'effective_to'}))}."
            )
        new_end = data.get("effective_to", book.effective_to)
        if new_end is not None and new_end < used_until:
            raise ConflictError(
                f"Price book {book.pk} priced usage up to {used_until:%Y-%m-%d}; "
                "effective_to cannot move before that."
            )
    for name, value in data.items():
        setattr(book, name, value)
    return validated_save(book)


@transaction.atomic
def price_book_delete(book: PriceBook) -> None:
    if book.lines.exists():
        raise ConflictError(
            f"Price book {book.pk} is used by an issued invoice and cannot be deleted; "
            "end it with effective_to and create a new version."
        )
    book.delete()


@transaction.atomic
def invoice_issue(*, tenant: Tenant, period: Period, issued_by: str = "") -> Invoice:
    """Close ``period`` for ``tenant``: claim its unbilled records and store priced lines
    (and the flagged unpriced ones, whose records stay unbilled).

    Only after the month has ended, once per tenant and period (409 otherwise). The tenant row
    is locked so two concurrent issues of the same tenant serialize.
    """
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
    if timezone.now() < period.end:
        raise ConflictError(f"Period {period.label} has not ended; it can be issued from "
                            f"{period.end:%Y-%m-%d}.")  # fmt: skip
    if Invoice.objects.filter(tenant=tenant, period=period.label).exists():
        raise ConflictError(f"Invoice {tenant.slug} {period.label} is already issued.")
    records, late = unbilled_for(tenant, period)
    invoice = Invoice.objects.create(
        tenant=tenant, period=period.label, currency=tenant.currency, total=0, saving=0,
        issued_by=issued_by[:150],
    )  # fmt: skip
    # One UPDATE claims the records; a record inserted after it stays for the next invoice.
    records.update(invoice=invoice)
    claimed = UsageRecord.objects.filter(invoice=invoice)
    draft = invoice_compute(tenant=tenant, period=period, records=claimed, late=late)
    for unpriced in draft.unpriced:  # billed once a price book covers them (an adjustment)
        unpriced.update(invoice=None)
    for line in draft.lines:
        line.invoice = invoice
    InvoiceLine.objects.bulk_create(draft.lines)
    invoice.total = draft.total
    invoice.saving = draft.saving
    invoice.sla = draft.sla
    invoice.save(update_fields=["total", "saving", "sla"])
    return invoice
