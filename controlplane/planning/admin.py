from django.contrib import admin

from controlplane.planning.models import Plan, Sweep, WorkloadProfile


@admin.register(WorkloadProfile)
class WorkloadProfileAdmin(admin.ModelAdmin[WorkloadProfile]):
    list_display = ("id", "name", "source", "scenario", "requests", "created_at")
    list_filter = ("source",)
    search_fields = ("name", "scenario")
    readonly_fields = ("stats", "created_at")


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin[Plan]):
    """Read-mostly: plans are created and activated through the API or the pages (the services
    keep the one-active and version invariants), so the admin only inspects them."""

    list_display = ("id", "scenario", "status", "progress", "version", "active", "created_at")
    list_filter = ("status", "active")
    readonly_fields = (
        "inputs", "result", "error", "status", "progress", "version", "active",
        "activated_at", "archived_at", "started_at", "finished_at", "created_at",
    )  # fmt: skip


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin[Sweep]):
    """Inspect-only: sweeps are requested through the API and computed by workers."""

    list_display = ("id", "status", "points", "done_points", "requested_by", "created_at")
    list_filter = ("status",)
    readonly_fields = (
        "inputs", "points", "done_points", "rows", "status", "message", "error",
        "requested_by", "created_at", "started_at", "finished_at",
    )  # fmt: skip
