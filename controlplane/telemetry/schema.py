"""Documents the dedicated /metrics token in the OpenAPI schema (drf-spectacular extension)."""

from controlplane.accounts.schema import ApiTokenScheme


class MetricsTokenScheme(ApiTokenScheme):  # type: ignore[no-untyped-call]
    target_class = "controlplane.telemetry.metrics.MetricsTokenAuthentication"
    name = "metricsToken"
    description = "The dedicated PDD_METRICS_TOKEN (for Prometheus scrapes)."
