from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    """What agents report, per request, and what is built on it: rollups, SLA alerts, the live
    stream and the Prometheus exposition."""

    name = "controlplane.telemetry"
    label = "telemetry"

    def ready(self) -> None:
        # Registers the OpenAPI extension; and the Celery tasks, which services queue by name.
        from controlplane.telemetry import schema, tasks  # noqa: F401
