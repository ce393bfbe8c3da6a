"""``/metrics``: Prometheus text exposition (format 0.0.4) of the cumulative counters.

Counters come from the cumulative ``site-pipeline`` rollup rows (updated in the ingestion
transaction, never pruned), so they only go up and survive restarts; a hit rate is
``rate(pdd_hit_tokens_total) / rate(pdd_input_tokens_total)``. TTFT and TPOT histograms reuse
the rollup buckets, exposed at every fifth edge (4 per decade, 0.1 ms to 1000 s).

Access: a bearer API token of scope operator or viewer, a browser session of such a user, or the
dedicated ``PDD_METRICS_TOKEN`` (for a Prometheus scrape config); anyone else gets 401/403.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import authentication, renderers
from rest_framework.authentication import SessionAuthentication
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.accounts.authentication import ApiTokenAuthentication, parse_authorization
from controlplane.accounts.permissions import ScopePermission
from controlplane.telemetry import integrations, sketch
from controlplane.telemetry.models import RollupScope, TelemetryRollup
from controlplane.telemetry.rollups import CUMULATIVE

EXPOSED_EDGES = range(0, sketch.N_BUCKETS - 1, 5)
COUNTERS = (
    ("pdd_requests_total", "requests", "Requests reported by agents (rejected included)."),
    ("pdd_rejected_requests_total", "rejected", "Requests rejected (HTTP 429) at admission."),
    ("pdd_sla_met_requests_total", "sla_met", "Served requests that met their SLA."),
    ("pdd_input_tokens_total", "input_tokens", "Input tokens of served requests."),
    ("pdd_hit_tokens_total", "hit_tokens", "Prefix-cache hit input tokens."),
    ("pdd_output_tokens_total", "output_tokens", "Output tokens."),
    ("pdd_wan_bytes_total", "wan_bytes", "KV bytes sent over the WAN."),
    ("pdd_rld_tokens_total", "rld_tokens", "Output tokens decoded on relay decode."),
)


class MetricsPrincipal:
    """The caller holding ``PDD_METRICS_TOKEN``: may scrape /metrics, nothing else."""

    is_authenticated = True
    is_anonymous = False
    username = "metrics-token"


class MetricsTokenAuthentication(authentication.BaseAuthentication):
    """Accepts exactly ``PDD_METRICS_TOKEN``; any other bearer goes on to the API tokens."""

    def authenticate(self, request: Request) -> tuple[Any, str] | None:
        expected = str(settings.TELEMETRY_METRICS_TOKEN)
        raw = parse_authorization(request.META.get("HTTP_AUTHORIZATION", ""))
        if expected and raw and hmac.compare_digest(raw.encode(), expected.encode()):
            return MetricsPrincipal(), "metrics-token"
        return None

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="metrics"'


class CanScrape(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        if request.auth == "metrics-token":
            return True
        return ScopePermission().has_permission(request, view)


class PrometheusRenderer(renderers.BaseRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:  # fmt: skip
        if isinstance(data, str):
            return data.encode()
        import json

        return json.dumps(data).encode()


class FirstRendererNegotiation(BaseContentNegotiation):
    """Scrapers send assorted Accept headers; there is one format."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


def _labels(**labels: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())


def _fmt(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(float(value)) if value % 1 else str(int(value))


def exposition(rows: Iterable[TelemetryRollup], *, plan_version: int, agents_up: int) -> str:
    """The text of /metrics for the cumulative rows."""
    rows = sorted(rows, key=lambda r: r.key)
    labelled = [(r, _labels(site=r.key.split("/", 1)[0], pipeline=r.key.split("/", 1)[-1]))
                for r in rows]  # fmt: skip
    lines: list[str] = []
    for name, field, help_text in COUNTERS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        lines += [f"{name}{{{lb}}} {int(getattr(r, field))}" for r, lb in labelled]
    for name, unit in (("ttft", "Time to first token"), ("tpot", "Time per output token")):
        metric = f"pdd_{name}_seconds"
        lines += [f"# HELP {metric} {unit} of served requests.", f"# TYPE {metric} histogram"]
        for r, lb in labelled:
            hist = getattr(r, f"{name}_hist")
            for upper, count in sketch.cumulative_below(hist, EXPOSED_EDGES):
                lines.append(f'{metric}_bucket{{{lb},le="{upper:.6g}"}} {count}')
            lines.append(f'{metric}_bucket{{{lb},le="+Inf"}} {getattr(r, f"{name}_count")}')
            lines.append(f"{metric}_sum{{{lb}}} {float(getattr(r, f'{name}_sum'))!r}")
            lines.append(f"{metric}_count{{{lb}}} {getattr(r, f'{name}_count')}")
    lines += [
        "# HELP pdd_active_plan_version Config version of the active plan (0: none).",
        "# TYPE pdd_active_plan_version gauge",
        f"pdd_active_plan_version {plan_version}",
        "# HELP pdd_agents_up Registered agents reporting healthy (0: none).",
        "# TYPE pdd_agents_up gauge",
        f"pdd_agents_up {agents_up}",
    ]
    return "\n".join(lines) + "\n"


class MetricsView(APIView):
    """Prometheus scrape endpoint (text exposition 0.0.4)."""

    authentication_classes = [MetricsTokenAuthentication, ApiTokenAuthentication,
                              SessionAuthentication]  # fmt: skip
    permission_classes = [CanScrape]
    renderer_classes = [PrometheusRenderer]
    content_negotiation_class = FirstRendererNegotiation

    @extend_schema(
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="metrics")},
        tags=["telemetry"],
    )
    def get(self, request: Request) -> Response:
        rows = TelemetryRollup.objects.filter(window_s=CUMULATIVE, scope=RollupScope.SITE_PIPELINE)
        plan = integrations.active_plan()
        text = exposition(rows, plan_version=plan.version if plan else 0,
                          agents_up=integrations.agents_up())  # fmt: skip
        return Response(text, content_type="text/plain; version=0.0.4; charset=utf-8")
