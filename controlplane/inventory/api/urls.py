"""Inventory routes, registered on the project's one API router (kebab-case plurals)."""

from controlplane.inventory.api import views

ROUTES = (
    ("sites", views.SiteViewSet, "site"),
    ("chip-models", views.ChipModelViewSet, "chip-model"),
    ("links", views.LinkViewSet, "link"),
    ("model-profiles", views.ModelProfileViewSet, "model-profile"),
    ("instance-pools", views.InstancePoolViewSet, "instance-pool"),
)
