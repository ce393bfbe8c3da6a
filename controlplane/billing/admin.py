"""Admin for billing: price books, keys, usage and invoices read-only here, because their writes
have rules only the services enforce (versions, hashing, issuing). Tenants: ``tenancy.admin``."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from controlplane.billing.models import ApiKey, Invoice, PriceBook, UsageRecord


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False


@admin.register(PriceBook)
class PriceBookAdmin(ReadOnlyAdmin):
    list_display = ("model", "currency", "miss_input_per_mtok", "hit_input_per_mtok",
                    "output_per_mtok", "effective_from", "effective_to")  # fmt: skip
    list_filter = ("currency",)


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyAdmin):
    list_display = ("name", "tenant", "prefix", "created_at", "last_used_at", "revoked_at")


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = ("request_id", "tenant", "model", "time", "miss_tokens", "hit_tokens")
    list_select_related = ("tenant",)


@admin.register(Invoice)
class InvoiceAdmin(ReadOnlyAdmin):
    list_display = ("tenant", "period", "currency", "total", "saving", "issued_at")
