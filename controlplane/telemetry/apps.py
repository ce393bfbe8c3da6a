from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    """What agents report, per request, and what is built on it: rollups, SLA alerts, the live
    stream and the Prometheus exposition."""

    name = "controlplane.telemetry"
    label = "telemetry"

    def ready(self) -> None:
        from controlplane.telemetry import schema  # noqa: F401  (registers the OpenAPI extension)
