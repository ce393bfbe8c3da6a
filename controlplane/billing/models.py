"""Billing: how a tenant (``tenancy.Tenant``) is charged: its gateway keys (ApiKey), at what price
(PriceBook), for what (UsageRecord), and what was billed (Invoice, InvoiceLine).

Money is ``Decimal`` end to end; prices are per million tokens. Issued invoices and their lines
are stored and never rewritten: usage arriving after a period was issued is billed as an
adjustment line on the next invoice (see ``invoicing``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from controlplane.core.models import RequestColumns
from controlplane.tenancy.models import Tenant, currency_validator


def money_field(**kwargs: Any) -> models.DecimalField:  # type: ignore[type-arg]
    """Amounts and prices: up to 10^14 currency units with 6 decimals (see ``pricing``)."""
    return models.DecimalField(max_digits=20, decimal_places=6, **kwargs)


period_validator = RegexValidator(r"^\d{4}-(0[1-9]|1[0-2])$", "Use YYYY-MM.")


class ApiKey(models.Model):
    """A gateway key of a tenant, stored as a SHA-256 hash and shown once at creation.

    Gateways never query the database per request: the control plane ships the active hash set
    (``selectors.api_key_hashes_for_gateway``) with their configuration. ``last_used_at`` is
    advanced from the request records agents report, not by the gateway.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Optional end of validity: gateways drop the key at this instant (their config channel
    # re-sends the key set when the next key expires).
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="apikey_name_unique_per_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.name} (tk_{self.prefix}_...)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and (
            self.expires_at is None or self.expires_at > timezone.now()
        )


class PriceBook(models.Model):
    """One version of a model's prices in one currency, per million tokens, for a time range.

    Versions of the same model and currency never overlap (``clean``), so every usage instant
    has at most one price. A version already used by an issued invoice is never edited in place;
    a price change is a new version (the services answer 409 otherwise).
    """

    model = models.ForeignKey(
        "inventory.ModelProfile", on_delete=models.PROTECT, related_name="price_books"
    )
    currency = models.CharField(max_length=3, default="USD", validators=[currency_validator])
    miss_input_per_mtok = money_field(validators=[MinValueValidator(0)])
    hit_input_per_mtok = money_field(validators=[MinValueValidator(0)])
    output_per_mtok = money_field(validators=[MinValueValidator(0)])
    effective_from = models.DateTimeField()
    effective_to = models.DateTimeField(null=True, blank=True, help_text="exclusive; open if empty")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model_id", "currency", "effective_from"]
        constraints = [
            models.CheckConstraint(
                condition=Q(hit_input_per_mtok__lte=F("miss_input_per_mtok")),
                name="pricebook_hit_not_above_miss",
            ),
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True) | Q(effective_to__gt=F("effective_from")),
                name="pricebook_range_not_empty",
            ),
            models.UniqueConstraint(
                fields=["model", "currency", "effective_from"], name="pricebook_version_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} {self.currency} from {self.effective_from:%Y-%m-%d %H:%M}"

    def clean(self) -> None:
        if (
            self.hit_input_per_mtok is not None
            and self.miss_input_per_mtok is not None
            and self.hit_input_per_mtok > self.miss_input_per_mtok
        ):
            raise ValidationError({"hit_input_per_mtok": "Cannot exceed miss_input_per_mtok."})
        if self.effective_to is not None and self.effective_to <= self.effective_from:
            raise ValidationError({"effective_to": "Must be after effective_from."})
        if self.model_id is None or self.effective_from is None:
            return
        overlapping = PriceBook.objects.filter(
            model_id=self.model_id, currency=self.currency
        ).exclude(pk=self.pk)
        overlapping = overlapping.filter(
            Q(effective_to__isnull=True) | Q(effective_to__gt=self.effective_from)
        )
        if self.effective_to is not None:
            overlapping = overlapping.filter(effective_from__lt=self.effective_to)
        other = overlapping.first()
        if other is not None:
            raise ValidationError(
                {"effective_from": f"Overlaps price book {other.pk} ({other}); versions of a "
                 "model and currency must not overlap: end the old one first."}
            )  # fmt: skip

    @property
    def hit_fraction(self) -> float | None:
        """Hit price as a fraction of the miss price (DOMAIN.md: typically 0.10 to 0.25)."""
        if not self.miss_input_per_mtok:
            return None
        return float(self.hit_input_per_mtok / self.miss_input_per_mtok)


class UsageRecord(RequestColumns):
    """Billable usage of one served request, written by the telemetry ingestion service.

    ``time`` is when the request finished (it is billed in that month). ``invoice`` is set when
    an invoice claims the record, so each record is billed exactly once: on its period's
    invoice, or, arriving after that was issued, as an adjustment on the next one.
    """

    # Ingestion inserts a row per served request: each index is paid on every one. The
    # tenant's own index would repeat the lead of ``(tenant, time)``; the invoice's holds only
    # the rows an invoice claimed (``invoice = x`` implies not null: the planner uses it).
    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="usage", db_index=False
    )
    time = models.DateTimeField()
    invoice = models.ForeignKey(
        "Invoice", null=True, blank=True, on_delete=models.PROTECT, related_name="records",
        db_index=False,
    )  # fmt: skip

    class Meta(RequestColumns.Meta):
        indexes = [
            models.Index(fields=["tenant", "time"]),
            models.Index(fields=["time"]),
            models.Index(
                fields=["invoice"], condition=Q(invoice__isnull=False), name="usagerecord_invoice"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "request_id"], name="usagerecord_unique_site_request"
            ),
        ]


class Invoice(models.Model):
    """An issued (closed) invoice of a tenant for a month; stored so it never changes."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="invoices")
    period = models.CharField(max_length=7, validators=[period_validator])
    currency = models.CharField(max_length=3)
    total = money_field()
    saving = money_field()
    sla = models.JSONField(default=dict, help_text="per model: requests, sla_met, attainment_pct")
    issued_at = models.DateTimeField(auto_now_add=True)
    issued_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["tenant_id", "period"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "period"], name="invoice_one_per_period")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.period}"


class LineKind(models.TextChoices):
    USAGE = "usage", "Usage of the period"
    ADJUSTMENT = "adjustment", "Late usage of an already issued period"


class InvoiceLine(models.Model):
    """Usage of one model at one price-book version; amounts rounded as ``pricing`` documents.

    A line without a price book is the usage no price book covered: flagged, its amounts zero,
    its records left unbilled (``invoicing``)."""

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    kind = models.CharField(max_length=16, choices=LineKind.choices)
    usage_period = models.CharField(max_length=7)
    model = models.CharField(max_length=64)
    config_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="the config version that routed these requests"
    )
    price_book = models.ForeignKey(
        PriceBook, null=True, blank=True, on_delete=models.PROTECT, related_name="lines",
        help_text="empty: usage no price book covers (unpriced, not billed)",
    )  # fmt: skip
    requests = models.PositiveIntegerField()
    sla_met_requests = models.PositiveIntegerField()
    miss_tokens = models.PositiveBigIntegerField()
    hit_tokens = models.PositiveBigIntegerField()
    output_tokens = models.PositiveBigIntegerField()
    miss_amount = money_field()
    hit_amount = money_field()
    output_amount = money_field()
    amount = money_field()
    saving = money_field()

    class Meta:
        ordering = ["invoice_id", "kind", "usage_period", "model", "config_version",
                    "price_book_id"]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.invoice} {self.kind} {self.model} {self.amount}"
