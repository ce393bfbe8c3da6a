"""Telemetry routes: ingestion and the summary are plain paths; rules and alerts are router
resources (registered on the project's one router)."""

from django.urls import path

from controlplane.telemetry.api import dead_letters, monitoring, views

ROUTES = (
    ("telemetry/sla-rules", monitoring.SlaRuleViewSet, "sla-rule"),
    ("telemetry/alerts", monitoring.AlertViewSet, "alert"),
    ("telemetry/dead-letters", dead_letters.DeadLetterViewSet, "dead-letter"),
)
URLS = [
    path("telemetry/records/", views.RecordIngestView.as_view(), name="telemetry-records"),
    path("telemetry/summary/", monitoring.SummaryView.as_view(), name="telemetry-summary"),
]
