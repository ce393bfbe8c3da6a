"""Admin for the inventory; writes run the same model validation as the API."""

from django.contrib import admin

from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin[Site]):
    list_display = ("slug", "name", "region")
    search_fields = ("slug", "name", "region")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(ChipModel)
class ChipModelAdmin(admin.ModelAdmin[ChipModel]):
    list_display = (
        "slug",
        "name",
        "vendor",
        "bf16_tflops",
        "hbm_gib",
        "hbm_tbps",
        "price_per_hour",
    )
    list_filter = ("vendor", "is_estimate")
    search_fields = ("slug", "name", "vendor")


@admin.register(Link)
class LinkAdmin(admin.ModelAdmin[Link]):
    list_display = ("slug", "kind", "source", "target", "bandwidth_gbps", "rtt_ms")
    list_filter = ("kind",)
    list_select_related = ("source", "target")


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin[ModelProfile]):
    list_display = ("slug", "name", "attention", "total_params_b", "active_params_b", "is_estimate")
    list_filter = ("attention", "is_estimate")
    search_fields = ("slug", "name")


@admin.register(InstancePool)
class InstancePoolAdmin(admin.ModelAdmin[InstancePool]):
    list_display = ("slug", "site", "role", "chip", "model", "chips_per_instance", "instance_count")
    list_filter = ("role", "site")
    list_select_related = ("site", "chip", "model")
