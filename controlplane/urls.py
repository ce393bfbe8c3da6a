"""URL map: the API under /api/v1/ on one router, schema and docs, admin, pages."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from controlplane.agents.api.urls import ROUTES as AGENT_ROUTES
from controlplane.billing.api.urls import ROUTES as BILLING_ROUTES
from controlplane.billing.api.urls import URLS as BILLING_URLS
from controlplane.inventory.api.urls import ROUTES as INVENTORY_ROUTES
from controlplane.planning.api.urls import ROUTES as PLANNING_ROUTES
from controlplane.planning.api.urls import URLS as PLANNING_URLS
from controlplane.telemetry.api.urls import ROUTES as TELEMETRY_ROUTES
from controlplane.telemetry.api.urls import URLS as TELEMETRY_URLS
from controlplane.telemetry.metrics import MetricsView

router = DefaultRouter()
for prefix, viewset, basename in (
    *INVENTORY_ROUTES,
    *BILLING_ROUTES,
    *AGENT_ROUTES,
    *TELEMETRY_ROUTES,
    *PLANNING_ROUTES,
):
    router.register(prefix, viewset, basename=basename)

urlpatterns = [
    path("api/v1/", include([*BILLING_URLS, *TELEMETRY_URLS, *PLANNING_URLS])),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("frontend.urls")),
]

handler404 = "controlplane.core.errors.not_found"
handler500 = "controlplane.core.errors.server_error"
handler403 = "controlplane.core.errors.permission_denied"
