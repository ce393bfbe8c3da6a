"""Agent routes on the project's one router: /api/v1/agents/ (+ register/, <id>/heartbeat/);
a site's desired state and its pool overrides under /api/v1/sites/<slug>/desired/."""

from django.urls import path

from controlplane.agents.api import views

ROUTES = (("agents", views.AgentViewSet, "agent"),)
URLS = [
    path("sites/<str:slug>/desired/", views.SiteDesiredView.as_view(), name="site-desired"),
    path(
        "sites/<str:slug>/desired/overrides/",
        views.PoolOverridesView.as_view(),
        name="site-pool-overrides",
    ),
    path(
        "sites/<str:slug>/desired/pools/<path:pool>/override/",
        views.PoolOverrideView.as_view(),
        name="site-pool-override",
    ),
]
