"""URL map: the API under /api/v1/ on one router, schema and docs, admin, probes, pages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from controlplane.agents.api.urls import ROUTES as AGENT_ROUTES
from controlplane.agents.api.urls import URLS as AGENT_URLS
from controlplane.billing.api.urls import ROUTES as BILLING_ROUTES
from controlplane.billing.api.urls import URLS as BILLING_URLS
from controlplane.core import health
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


def login_first(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page of the API (Swagger UI, ReDoc) opened by a browser without a session or a token
    is sent to the login and back, as every other page is; a request carrying credentials
    goes on to the view, whose API authentication judges them (401, 403 or the page)."""

    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated and "HTTP_AUTHORIZATION" not in request.META:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper


urlpatterns = [
    path("api/v1/", include([*BILLING_URLS, *TELEMETRY_URLS, *PLANNING_URLS, *AGENT_URLS])),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "api/docs/",
        login_first(SpectacularSwaggerView.as_view(url_name="schema")),
        name="api-docs",
    ),
    path(
        "api/redoc/",
        login_first(SpectacularRedocView.as_view(url_name="schema")),
        name="api-redoc",
    ),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("healthz", require_safe(health.healthz), name="healthz"),
    path("readyz", require_safe(health.readyz), name="readyz"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("frontend.urls")),
]

handler404 = "controlplane.core.errors.not_found"
handler500 = "controlplane.core.errors.server_error"
handler403 = "controlplane.core.errors.permission_denied"
