"""Billing routes: resources on the project's router, aggregates and invoices as paths."""

from django.urls import path

from controlplane.billing.api import views
from controlplane.billing.api.renderers import CsvRenderer

ROUTES = (
    ("billing/tenants", views.TenantViewSet, "billing-tenant"),
    ("billing/api-keys", views.ApiKeyViewSet, "billing-api-key"),
    ("billing/price-books", views.PriceBookViewSet, "billing-price-book"),
    ("billing/usage-records", views.UsageRecordViewSet, "billing-usage-record"),
)
URLS = [
    path("billing/usage/", views.UsageView.as_view(), name="billing-usage"),
    path(
        "billing/usage.csv",
        views.UsageView.as_view(renderer_classes=[CsvRenderer]),
        name="billing-usage-csv",
    ),
    path(
        "billing/invoices/<slug:tenant>/<str:period>/",
        views.InvoiceView.as_view(),
        name="billing-invoice",
    ),
    path(
        "billing/invoices/<slug:tenant>/<str:period>/issue/",
        views.InvoiceIssueView.as_view(),
        name="billing-invoice-issue",
    ),
]
