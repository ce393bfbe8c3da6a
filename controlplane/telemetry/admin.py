"""Admin for request records: read-only, they are what agents reported."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from controlplane.telemetry.models import RequestRecord


@admin.register(RequestRecord)
class RequestRecordAdmin(admin.ModelAdmin[RequestRecord]):
    list_display = ("request_id", "tenant", "model", "site", "pipeline", "finish_time", "sla_met")
    list_filter = ("pipeline", "sla_met", "rejected")
    search_fields = ("request_id", "tenant")

    def has_change_permission(self, request: HttpRequest, obj: RequestRecord | None = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
