from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from frontend import (
    alert_pages,
    billing_pages,
    inventory_pages,
    overview_pages,
    plan_pages,
    topology_pages,
)

urlpatterns = [
    # Browsers ask for /favicon.ico on pages that do not name an icon (the admin, the API docs).
    path("favicon.ico", RedirectView.as_view(url=static("frontend/favicon.svg"), permanent=True)),
    path("plans/", plan_pages.plan_list, name="plan-list"),
    path("plans/from-live/", plan_pages.plan_from_live, name="plan-from-live"),
    path("plans/<int:pk>/", plan_pages.plan_detail, name="plan-page"),
    path("plans/<int:pk>/activate/", plan_pages.plan_activate, name="plan-activate"),
    path("", overview_pages.overview, name="home"),
    path("topology/", topology_pages.topology, name="topology"),
    path("catalogue/", topology_pages.catalogue, name="catalogue"),
    path("alerts/", alert_pages.alerts, name="alerts"),
    path("billing/", billing_pages.billing_home, name="billing-home"),
    path("billing/invoices/", billing_pages.invoice_list, name="billing-invoices"),
    path(
        "billing/invoices/<str:tenant>/<str:period>/",
        billing_pages.invoice_detail,
        name="billing-invoice",
    ),
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
