"""Billing serializers. Money is a decimal string (``"12.345678"``), never a float."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.fields import SkipField

from controlplane.billing.invoicing import issued_document
from controlplane.billing.models import ApiKey, Invoice, InvoiceLine, PriceBook, UsageRecord
from controlplane.core.api import BriefRelatedField, StrictJsonTypes
from controlplane.inventory.models import ModelProfile
from controlplane.tenancy.models import Tenant


def money(**kwargs: Any) -> serializers.DecimalField:
    """A decimal string with six places, as stored (never a float)."""
    return serializers.DecimalField(max_digits=20, decimal_places=6, **kwargs)


class TenantSerializer(StrictJsonTypes, serializers.ModelSerializer[Tenant]):
    class Meta:
        model = Tenant
        fields = ["id", "slug", "name", "currency", "is_active", "created_at"]
        read_only_fields = ["created_at"]


class ApiKeySerializer(StrictJsonTypes, serializers.ModelSerializer[ApiKey]):
    tenant = BriefRelatedField(queryset=Tenant.objects.all())
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiKey
        fields = ["id", "tenant", "name", "prefix", "is_active", "created_at", "last_used_at",
                  "revoked_at", "expires_at"]  # fmt: skip
        read_only_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
        validators: list[Any] = []  # the unique name per tenant is checked by the model


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(read_only=True, help_text="the whole key, shown only this once")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]


class PriceBookSerializer(StrictJsonTypes, serializers.ModelSerializer[PriceBook]):
    model = BriefRelatedField(queryset=ModelProfile.objects.all())
    miss_input_per_mtok = money(min_value=0)
    hit_input_per_mtok = money(min_value=0)
    output_per_mtok = money(min_value=0)
    hit_fraction = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = PriceBook
        fields = ["id", "model", "currency", "miss_input_per_mtok", "hit_input_per_mtok",
                  "output_per_mtok", "hit_fraction", "effective_from", "effective_to",
                  "created_at"]  # fmt: skip
        read_only_fields = ["created_at"]
        validators: list[Any] = []  # overlaps are checked by the model with a clear message


class UsageRecordSerializer(serializers.ModelSerializer[UsageRecord]):
    tenant: serializers.SlugRelatedField[Tenant] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = UsageRecord
        fields = ["id", "request_id", "tenant", "model", "site", "pipeline", "time", "miss_tokens",
                  "hit_tokens", "output_tokens", "sla_met", "config_version",
                  "received_at"]  # fmt: skip


class _GroupedVersion(serializers.IntegerField):
    """A row's ``config_version``: present (possibly null: usage before any plan) only when the
    usage is grouped by it. DRF answers null for an absent key of a nullable field, so an
    absent key is skipped here instead."""

    def get_attribute(self, instance: Any) -> Any:
        if "config_version" not in instance:
            raise SkipField()
        return instance["config_version"]


class UsageRowSerializer(serializers.Serializer):  # type: ignore[type-arg]
    bucket = serializers.DateTimeField(required=False, help_text="start of the time bucket")
    model = serializers.CharField(required=False)
    site = serializers.CharField(required=False)
    pipeline = serializers.CharField(required=False)
    tenant = serializers.CharField(required=False)
    config_version = _GroupedVersion(
        required=False, allow_null=True, help_text="null: routed by the gateway's file alone"
    )
    requests = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    miss_tokens = serializers.IntegerField()
    hit_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    sla_met_requests = serializers.IntegerField()


class UsageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """``{tenant, from, to, group_by, results}``; ``from`` and ``to`` are Python keywords, so
    they are added in ``get_fields``."""

    tenant = serializers.CharField(allow_null=True)
    group_by = serializers.ListField(child=serializers.CharField())
    results = UsageRowSerializer(many=True)

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        fields["from"] = serializers.DateTimeField(help_text="inclusive")
        fields["to"] = serializers.DateTimeField(help_text="exclusive")
        return fields


class InvoiceLineSerializer(serializers.ModelSerializer[InvoiceLine]):
    """An invoice line (stored, or a draft's unsaved one) with its price-book version's
    prices; ``priced`` false flags usage no price book covers (no prices, amounts zero, not in
    the total)."""

    priced = serializers.SerializerMethodField()
    price_book = serializers.IntegerField(source="price_book.pk", allow_null=True)
    miss_input_per_mtok = money(source="price_book.miss_input_per_mtok", allow_null=True)
    hit_input_per_mtok = money(source="price_book.hit_input_per_mtok", allow_null=True)
    output_per_mtok = money(source="price_book.output_per_mtok", allow_null=True)

    class Meta:
        model = InvoiceLine
        fields = ["kind", "usage_period", "model", "config_version", "priced", "price_book",
                  "miss_input_per_mtok",
                  "hit_input_per_mtok", "output_per_mtok", "requests", "sla_met_requests",
                  "miss_tokens", "hit_tokens", "output_tokens", "miss_amount", "hit_amount",
                  "output_amount", "amount", "saving"]  # fmt: skip
        read_only_fields = fields

    def get_priced(self, line: InvoiceLine) -> bool:
        return line.price_book is not None


class SlaSerializer(serializers.Serializer):  # type: ignore[type-arg]
    requests = serializers.IntegerField()
    sla_met = serializers.IntegerField()
    attainment_pct = serializers.CharField(allow_null=True)


class InvoiceSerializer(serializers.Serializer):  # type: ignore[type-arg]
    tenant = serializers.CharField(source="tenant.slug")
    period = serializers.CharField()
    status = serializers.ChoiceField(choices=["draft", "issued"])
    issued_at = serializers.DateTimeField(allow_null=True)
    currency = serializers.CharField()
    lines = InvoiceLineSerializer(many=True)
    total = money()
    saving = money(help_text="what the cache-hit discount saved: hit tokens x (miss - hit price)")
    sla = serializers.DictField(child=SlaSerializer(), help_text="per model")


def invoice_payload(invoice: Invoice) -> dict[str, Any]:
    return issued_document(invoice)
