from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from frontend import dashboard_pages, inventory_pages, plan_pages

urlpatterns = [
    # Browsers ask for /favicon.ico on pages that do not name an icon (the admin, the API docs).
    path("favicon.ico", RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=True)),
    path("plans/", plan_pages.plan_list, name="plan-list"),
    path("plans/<int:pk>/", plan_pages.plan_detail, name="plan-page"),
    path("plans/<int:pk>/activate/", plan_pages.plan_activate, name="plan-activate"),
    path("", dashboard_pages.overview, name="home"),
    path("topology/", dashboard_pages.topology, name="topology"),
    path("alerts/", dashboard_pages.alerts, name="alerts"),
    path("inventory/<str:kind>/", inventory_pages.inventory_list, name="inventory-list"),
    path("inventory/<str:kind>/new/", inventory_pages.inventory_edit, name="inventory-create"),
    path(
        "inventory/<str:kind>/<str:slug>/edit/",
        inventory_pages.inventory_edit,
        name="inventory-edit",
    ),
    path(
        "inventory/<str:kind>/<str:slug>/delete/",
        inventory_pages.inventory_delete,
        name="inventory-delete",
    ),
]
