"""Admin for tenancy: tenants are editable here (their API and its rules are billing's)."""

from __future__ import annotations

from django.contrib import admin

from controlplane.tenancy.models import Tenant


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin[Tenant]):
    list_display = ("slug", "name", "currency", "is_active")
    search_fields = ("slug", "name")
