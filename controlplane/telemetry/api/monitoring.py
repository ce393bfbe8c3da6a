"""Monitoring REST: the window summary, SLA rules (operators write, viewers read), alerts.

``GET /api/v1/telemetry/summary/?window=5s|1m&scope=all|site:<slug>|pool:<pipeline>|
tenant:<slug>|model:<slug>&points=N`` answers the latest window of the scope and the last ``N``
windows (default 60, at most 720) with the figures of ``telemetry.summary``.
"""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.core.api import ServiceModelViewSet, StrictJsonTypes
from controlplane.core.broadcast import config_changed
from controlplane.telemetry import selectors
from controlplane.telemetry.models import Alert, SlaRule

WINDOW_PARAM = {"5s": 5, "1m": 60}
SUMMARY_SCOPES = {"all", "site", "pool", "tenant", "model"}
MAX_POINTS = 720
# What ``parse_scope`` takes, as the API schema states it.
SCOPE_PATTERN = "^(all|(site|pool|tenant|model):[^\\u0000]+)$"


class SummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    window = serializers.CharField()
    scope = serializers.CharField()
    key = serializers.CharField(allow_blank=True)
    latest = serializers.DictField(allow_null=True, help_text="the most recent window, or null")
    series = serializers.ListField(child=serializers.DictField(), help_text="oldest first")


def parse_scope(raw: str) -> tuple[str, str]:
    scope, _, key = raw.partition(":")
    if scope not in SUMMARY_SCOPES or (scope == "all") != (key == ""):
        raise ValidationError(
            {"scope": ["Expected all, or site:<slug>, pool:<pipeline>, tenant:<slug>, "
                       "model:<slug>."]}
        )  # fmt: skip
    return scope, key


class SummaryView(APIView):
    """Live figures of one scope (operators and viewers)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("window", OpenApiTypes.STR, enum=list(WINDOW_PARAM), default="5s"),
            OpenApiParameter(
                "scope",
                OpenApiTypes.STR,
                default="all",
                description="all | site:<slug> | pool:<pipeline> | tenant:<slug> | model:<slug>",
                pattern=SCOPE_PATTERN,
            ),
            OpenApiParameter(
                "points", {"type": "integer", "minimum": 1, "maximum": MAX_POINTS}, default=60
            ),
        ],
        responses={200: SummarySerializer},
        tags=["telemetry"],
    )
    def get(self, request: Request) -> Response:
        # An empty parameter is absent, as everywhere in the API (core.schema).
        window = request.query_params.get("window") or "5s"
        if window not in WINDOW_PARAM:
            raise ValidationError({"window": ["Expected 5s or 1m."]})
        scope, key = parse_scope(request.query_params.get("scope") or "all")
        try:
            points = int(request.query_params.get("points") or "60")
        except ValueError:
            raise ValidationError({"points": ["Expected an integer."]}) from None
        if not 1 <= points <= MAX_POINTS:
            raise ValidationError({"points": [f"Expected 1 to {MAX_POINTS}."]})
        series = selectors.series(window_s=WINDOW_PARAM[window], scope=scope, key=key,
                                  points=points)  # fmt: skip
        return Response({"window": window, "scope": scope, "key": key,
                         "latest": series[-1] if series else None, "series": series})  # fmt: skip


class SlaRuleSerializer(StrictJsonTypes, serializers.ModelSerializer[SlaRule]):
    class Meta:
        model = SlaRule
        fields = ["id", "slug", "name", "model", "tenant", "metric", "threshold", "window_s",
                  "enabled", "webhook_url", "created_at"]  # fmt: skip
        read_only_fields = ["created_at"]


class SlaRuleViewSet(ServiceModelViewSet):
    """SLA targets per model and tenant; evaluated every 5 s on the last closed window."""

    queryset = selectors.sla_rule_list()
    serializer_class = SlaRuleSerializer

    def _announce(self, action: str, slug: str) -> None:
        # A rule's thresholds are the gateways' per-request targets (agents.config).
        super()._announce(action, slug)
        transaction.on_commit(lambda: config_changed(f"sla-rule.{action}"))

    filterset_fields = ["model", "tenant", "metric", "enabled"]
    search_fields = ["slug", "name"]
    ordering_fields = ["slug", "created_at"]


class AlertSerializer(serializers.ModelSerializer[Alert]):
    rule = serializers.SlugRelatedField[SlaRule](slug_field="slug", read_only=True)
    metric = serializers.CharField(source="rule.metric", read_only=True)

    class Meta:
        model = Alert
        fields = ["id", "rule", "metric", "state", "first_seen", "last_seen", "resolved_at",
                  "value", "worst", "threshold"]  # fmt: skip


class AlertViewSet(viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    """Alerts opened and resolved by the evaluator (read-only: they follow the data)."""

    queryset = selectors.alert_list()
    serializer_class = AlertSerializer
    filterset_fields = ["state"]
    ordering_fields = ["first_seen", "last_seen"]
