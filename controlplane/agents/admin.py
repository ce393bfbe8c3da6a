from django.contrib import admin

from controlplane.agents.models import Agent


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin[Agent]):
    list_display = ("name", "site", "role", "status", "config_version", "last_heartbeat_at")
    list_filter = ("role", "site")
    readonly_fields = ("registered_at", "last_heartbeat_at", "config_version", "config_acked_at")
