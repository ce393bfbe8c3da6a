"""Telemetry routes: the ingestion endpoint (not a router resource, so a plain path)."""

from django.urls import path

from controlplane.telemetry.api import views

ROUTES = ()
URLS = [
    path("telemetry/records/", views.RecordIngestView.as_view(), name="telemetry-records"),
]
