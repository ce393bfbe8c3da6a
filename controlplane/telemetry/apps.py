from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    """What agents report: one record per served request, ingested idempotently by request id."""

    name = "controlplane.telemetry"
    label = "telemetry"
