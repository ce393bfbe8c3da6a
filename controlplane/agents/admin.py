from typing import Any

from django.contrib import admin

from controlplane.agents.models import Agent, PoolOverride


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin[Agent]):
    list_display = ("name", "site", "role", "status", "config_version", "last_heartbeat_at")
    list_filter = ("role", "site")
    readonly_fields = ("registered_at", "last_heartbeat_at", "config_version", "config_acked_at")


@admin.register(PoolOverride)
class PoolOverrideAdmin(admin.ModelAdmin[PoolOverride]):
    """Read-only: overrides are set and cleared through the API, so each change is recorded."""

    list_display = ("site", "pool", "instances", "version", "set_by", "set_at", "cleared_at")
    list_filter = ("site",)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
