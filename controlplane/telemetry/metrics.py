"""``/metrics``: the fleet's figures for Prometheus, exposed with ``prometheus_client``.

Per scrape a ``FleetCollector`` reads a handful of rows and yields metric families; the
library writes the exposition (text 0.0.4, or OpenMetrics when the scraper asks for it).

- **Counters since the first record**, labelled ``site`` and ``pipeline``, from the cumulative
  ``site-pipeline`` rollup rows (updated in the ingestion transaction, never pruned): requests,
  rejections, requests that met their SLA, input/hit/output tokens, WAN bytes, RLD and MD
  tokens; TTFT and TPOT histograms on every fifth rollup bucket edge (4 per decade). Goodput is
  ``rate(pdd_sla_met_requests_total[5m])``, SLA attainment its ratio to
  ``rate(pdd_requests_total[5m])``, the observed hit rate ``rate(pdd_hit_tokens_total)`` over
  ``rate(pdd_input_tokens_total)``; ``deploy/prometheus/pdd-rules.yml`` records them.
- **The dashboard's figures of the last closed minute**, per deployment and per ``site``,
  ``pipeline`` and ``model`` (one family per dimension, so that no sum counts a request twice):
  goodput, SLA attainment, BCR and the observed hit rate, computed by ``telemetry.summary``
  exactly as the dashboard computes them (a model's BCR is over the whole deployment's cost:
  models share the pools). A key without traffic in that
  minute has no sample there (its counters still say so).
- **Cost per hour** of the deployment, of each site's and of each pipeline's pools
  (``selectors.cost_rates``), and the **active plan's predictions** for its model: hit rate
  (token- and request-weighted), goodput and BCR, beside which the observed ones are graphed.
  The plan predicts for its model as a whole; there is no per-site or per-pipeline prediction.

SLA attainment is the share of all requests (rejections included) served within their SLA: a
rejected request missed its SLA, so shedding load cannot raise attainment.

Access: a bearer API token of scope operator or viewer, a browser session of such a user, or the
dedicated ``PDD_METRICS_TOKEN`` (for a Prometheus scrape config); anyone else gets 401/403.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from rest_framework import authentication, renderers
from rest_framework.authentication import SessionAuthentication
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from controlplane.accounts.authentication import ApiTokenAuthentication, parse_authorization
from controlplane.accounts.permissions import ScopePermission
from controlplane.telemetry import integrations, selectors, sketch
from controlplane.telemetry.dead_letters import DeadLetterCount, dead_letter_counts
from controlplane.telemetry.models import RollupScope, TelemetryRollup
from controlplane.telemetry.rollups import CUMULATIVE

EXPOSED_EDGES = range(0, sketch.N_BUCKETS - 1, 5)
WINDOW_S = 60
COUNTERS = (
    ("pdd_requests", "requests", "Requests reported by agents (rejected included)."),
    ("pdd_rejected_requests", "rejected", "Requests rejected (HTTP 429) at admission."),
    ("pdd_sla_met_requests", "sla_met", "Served requests that met their SLA."),
    ("pdd_input_tokens", "input_tokens", "Input tokens of served requests."),
    ("pdd_hit_tokens", "hit_tokens", "Prefix-cache hit input tokens."),
    ("pdd_output_tokens", "output_tokens", "Output tokens."),
    ("pdd_wan_bytes", "wan_bytes", "KV bytes sent over the WAN."),
    ("pdd_rld_tokens", "rld_tokens", "Output tokens decoded on relay decode."),
    ("pdd_md_tokens", "md_tokens", "Output tokens decoded on main decode."),
)
# Window scope -> (the name part and label of its families); ALL has neither.
DIMENSIONS = {
    RollupScope.ALL.value: ("", None),
    RollupScope.SITE.value: ("site_", "site"),
    RollupScope.POOL.value: ("pipeline_", "pipeline"),
    RollupScope.MODEL.value: ("model_", "model"),
}
WINDOW_FIGURES = (
    ("goodput_requests_per_second", "Requests served within their SLA per second"),
    ("sla_attainment_ratio", "Share of requests (rejections included) served within their SLA"),
    ("bcr", "Benefit-cost ratio: goodput (requests/s) per hardware cost ($/h)"),
)
WEIGHTINGS = ("token", "request")


@dataclass(frozen=True)
class PlanPrediction:
    """What the active plan predicted for its model (None where it says nothing)."""

    version: int
    model: str
    hit: Mapping[str, float | None]
    goodput_rps: float | None
    bcr: float | None


def plan_prediction() -> PlanPrediction | None:
    plan = integrations.active_plan()
    if plan is None:
        return None
    predicted = plan.predicted

    def number(key: str) -> float | None:
        value = predicted.get(key)
        return float(value) if isinstance(value, int | float) else None

    return PlanPrediction(
        version=plan.version,
        model=plan.model,
        hit={w: number(f"hit_{w}_weighted") for w in WEIGHTINGS},
        goodput_rps=number("goodput_rps"),
        bcr=number("bcr"),
    )


@dataclass(frozen=True, eq=False)  # a registry keys collectors by identity
class FleetCollector:
    """One scrape's families (``prometheus_client``'s custom-collector protocol)."""

    cumulative: Sequence[TelemetryRollup]
    window: Sequence[TelemetryRollup]
    window_start: datetime
    rates: Mapping[str, Any]
    plan: PlanPrediction | None
    agents_up: int
    objectives: Mapping[str, float]
    dead_letters: Sequence[DeadLetterCount] = ()
    rejected_by_agent: Sequence[tuple[str, str, int]] = ()  # site, agent, records_rejected

    @classmethod
    def from_database(cls, now: datetime) -> FleetCollector:
        """The rows of the cumulative counters and of the last closed minute before ``now``."""
        start = datetime.fromtimestamp(int(now.timestamp()) // WINDOW_S * WINDOW_S, tz=now.tzinfo)
        start -= timedelta(seconds=WINDOW_S)
        return cls(
            cumulative=list(
                TelemetryRollup.objects.filter(
                    window_s=CUMULATIVE, scope=RollupScope.SITE_PIPELINE
                ).order_by("key")
            ),
            window=list(
                TelemetryRollup.objects.filter(
                    window_s=WINDOW_S, start=start, scope__in=list(DIMENSIONS)
                ).order_by("scope", "key")
            ),
            window_start=start,
            rates=selectors.cost_rates(),
            plan=plan_prediction(),
            agents_up=integrations.agents_up(),
            objectives=selectors.sla_lines(),
            dead_letters=dead_letter_counts(),
            rejected_by_agent=[
                (a["site"], a["name"], a["records_rejected"])
                for a in integrations.agents() or ()
                if a["records_rejected"] is not None
            ],
        )

    def collect(self) -> Iterator[Metric]:
        yield from self._counters()
        yield from self._window()
        yield from self._costs()
        yield from self._plan()
        yield GaugeMetricFamily("pdd_agents_up", "Registered agents reporting healthy.",
                                value=self.agents_up)  # fmt: skip
        objective = GaugeMetricFamily(
            "pdd_sla_objective_seconds",
            "Deployment-wide SLA targets (the enabled SLA rules, else pdd_core's defaults).",
            labels=["objective"],
        )
        for name, seconds in sorted(self.objectives.items()):
            objective.add_metric([name], float(seconds))
        yield objective
        yield from self._dead_letters()

    def _dead_letters(self) -> Iterator[Metric]:
        """Refused records per agent: kept by the control plane (pending a replay, and all
        kept), and as each gateway counts them since it started (its heartbeat)."""
        labels = ["site", "agent"]
        pending = GaugeMetricFamily(
            "pdd_dead_letters_pending", "Refused records waiting for a replay.", labels=labels
        )
        kept = GaugeMetricFamily(
            "pdd_dead_letters", "Refused records kept (replayed included).", labels=labels
        )
        for count in self.dead_letters:
            pending.add_metric([count.site, count.agent], count.pending)
            kept.add_metric([count.site, count.agent], count.total)
        rejected = CounterMetricFamily(
            "pdd_agent_records_rejected",
            "Records the control plane refused, as the agent's shipper counts them since it "
            "started (heartbeat records_rejected).",
            labels=labels,
        )
        for site, agent, value in self.rejected_by_agent:
            rejected.add_metric([site, agent], value)
        yield from (pending, kept, rejected)

    def _counters(self) -> Iterator[Metric]:
        labels = ["site", "pipeline"]
        cells = [(row, row.key.split("/", 1)) for row in self.cumulative]
        for name, field, help_text in COUNTERS:
            family = CounterMetricFamily(name, help_text, labels=labels)
            for row, (site, pipeline) in cells:
                family.add_metric([site, pipeline], int(getattr(row, field)))
            yield family
        for name, what in (("ttft", "Time to first token"), ("tpot", "Time per output token")):
            histogram = HistogramMetricFamily(
                f"pdd_{name}_seconds", f"{what} of served requests.", labels=labels
            )
            for row, (site, pipeline) in cells:
                edges = sketch.cumulative_below(getattr(row, f"{name}_hist"), EXPOSED_EDGES)
                buckets = [(f"{upper:.6g}", float(count)) for upper, count in edges]
                buckets.append(("+Inf", float(getattr(row, f"{name}_count"))))
                total = float(getattr(row, f"{name}_sum"))
                histogram.add_metric([site, pipeline], buckets, total)
            yield histogram

    def _window(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "pdd_window_start_timestamp_seconds",
            "Start of the closed minute the pdd_*_ratio, goodput and BCR gauges describe.",
            value=self.window_start.timestamp(),
        )
        points = [(row, selectors.point_of(row, self.rates)) for row in self.window]
        for scope, (part, label) in DIMENSIONS.items():
            labels = [label] if label else []
            mine = [(row, point) for row, point in points if row.scope == scope]
            for figure, help_text in WINDOW_FIGURES:
                family = GaugeMetricFamily(f"pdd_{part}{figure}", f"{help_text}, last minute.",
                                           labels=labels)  # fmt: skip
                for row, point in mine:
                    value = window_figure(figure, row, point)
                    if value is not None:
                        family.add_metric([row.key] if label else [], value)
                yield family
            family = GaugeMetricFamily(
                f"pdd_{part}observed_hit_ratio",
                "Prefix-cache hit rate of served requests, last minute (by token or by request).",
                labels=[*labels, "weighting"],
            )
            for row, point in mine:
                for weighting in WEIGHTINGS:
                    value = point[f"hit_{weighting}_weighted"]
                    if value is not None:
                        family.add_metric([*([row.key] if label else []), weighting], value)
            yield family

    def _costs(self) -> Iterator[Metric]:
        help_text = "Hardware cost per hour of the pools behind"
        yield GaugeMetricFamily("pdd_cost_per_hour_dollars", f"{help_text} the deployment.",
                                value=float(self.rates["all"]))  # fmt: skip
        for scope, key in ((RollupScope.SITE.value, "site"), (RollupScope.POOL.value, "pool")):
            part, label = DIMENSIONS[scope]
            assert label is not None
            family = GaugeMetricFamily(
                f"pdd_{part}cost_per_hour_dollars", f"{help_text} each {label}.", labels=[label]
            )
            for name, cost in sorted(self.rates[key].items()):
                family.add_metric([name], float(cost))
            yield family

    def _plan(self) -> Iterator[Metric]:
        plan = self.plan
        yield GaugeMetricFamily("pdd_active_plan_version",
                                "Config version of the active plan (0: none).",
                                value=plan.version if plan else 0)  # fmt: skip
        hit = GaugeMetricFamily(
            "pdd_model_predicted_hit_ratio",
            "Prefix-cache hit rate the active plan predicted for its model.",
            labels=["model", "weighting"],
        )
        goodput = GaugeMetricFamily(
            "pdd_model_predicted_goodput_requests_per_second",
            "Goodput the active plan predicted for its model.",
            labels=["model"],
        )
        bcr = GaugeMetricFamily(
            "pdd_model_predicted_bcr", "BCR the active plan predicted for its model.",
            labels=["model"],
        )  # fmt: skip
        if plan is not None and plan.model:
            for weighting, value in plan.hit.items():
                if value is not None:
                    hit.add_metric([plan.model, weighting], value)
            if plan.goodput_rps is not None:
                goodput.add_metric([plan.model], plan.goodput_rps)
            if plan.bcr is not None:
                bcr.add_metric([plan.model], plan.bcr)
        yield from (hit, goodput, bcr)


def window_figure(figure: str, row: TelemetryRollup, point: Mapping[str, Any]) -> float | None:
    """One gauge's value from a window's point (``summary.summarize``) and row."""
    if figure == "goodput_requests_per_second":
        return float(point["goodput_rps"])
    if figure == "sla_attainment_ratio":
        return row.sla_met / row.requests if row.requests else None
    bcr = point["bcr"]
    return None if bcr is None else float(bcr)


def exposition(accept: str, now: datetime | None = None) -> tuple[bytes, str]:
    """The body and content type of one scrape (OpenMetrics if ``accept`` asks for it)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector.from_database(now or timezone.now()))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


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


class MetricsView(APIView):
    """Prometheus scrape endpoint (text 0.0.4, or OpenMetrics when the scraper asks for it)."""

    authentication_classes = [MetricsTokenAuthentication, ApiTokenAuthentication,
                              SessionAuthentication]  # fmt: skip
    permission_classes = [CanScrape]
    renderer_classes = [PrometheusRenderer]
    content_negotiation_class = FirstRendererNegotiation

    @extend_schema(
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="metrics")},
        tags=["telemetry"],
    )
    def get(self, request: Request) -> HttpResponse:
        body, content_type = exposition(request.META.get("HTTP_ACCEPT", ""))
        return HttpResponse(body, content_type=content_type)
