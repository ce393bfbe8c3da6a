"""Documents the dedicated /metrics token in the OpenAPI schema (drf-spectacular extension)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class MetricsTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "controlplane.telemetry.metrics.MetricsTokenAuthentication"
    name = "metricsToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The dedicated PDD_METRICS_TOKEN (for Prometheus scrapes).",
        }
