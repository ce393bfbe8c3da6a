"""Agent REST endpoints: register and heartbeat (agent tokens); the registry (operators)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.accounts.models import ApiToken, Scope
from controlplane.agents import selectors, services
from controlplane.agents.api import serializers
from controlplane.agents.config import current_version
from controlplane.agents.models import Agent, AgentStatus


def _token(request: Request) -> ApiToken | None:
    return request.auth if isinstance(request.auth, ApiToken) else None


class AgentViewSet(viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    """The registry. Operators and viewers read it; agents register and heartbeat."""

    serializer_class = serializers.AgentSerializer
    lookup_value_regex = r"[0-9]+"
    read_scopes = frozenset({Scope.OPERATOR.value, Scope.VIEWER.value})
    write_scopes = frozenset({Scope.AGENT.value})

    def get_queryset(self) -> Any:
        queryset = selectors.agent_list()
        params = self.request.query_params
        if params.get("site"):
            queryset = queryset.filter(site__slug=params["site"])
        if params.get("role"):
            queryset = queryset.filter(role=params["role"])
        if params.get("status") in AgentStatus.values:
            queryset = selectors.agents_with_status(queryset, params["status"])
        return queryset

    @extend_schema(
        parameters=[
            OpenApiParameter("site", str), OpenApiParameter("role", str),
            OpenApiParameter("status", str, enum=AgentStatus.values),
        ]
    )  # fmt: skip
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=serializers.RegisterSerializer, responses={201: serializers.RegisteredSerializer}
    )
    @action(detail=False, methods=["post"])
    def register(self, request: Request) -> Response:
        """Register (or re-register after a restart) an agent of the token's site."""
        body = serializers.RegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        site = data.pop("site")
        agent = services.agent_register(token=_token(request), site=site, data=data)
        out = {
            "id": agent.pk,
            "heartbeat_interval_s": settings.AGENT_HEARTBEAT_INTERVAL_S,
            "config_ws": f"/ws/agents/{agent.pk}/",
            "config_version": current_version(),
        }
        return Response(out, status=status.HTTP_201_CREATED)

    @extend_schema(request=serializers.HeartbeatSerializer, responses=serializers.AgentSerializer)
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str | None = None) -> Response:
        """Liveness, the config version running, stats, and an outage the agent rode out."""
        agent = get_object_or_404(Agent.objects.select_related("site"), pk=pk)
        body = serializers.HeartbeatSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        agent = services.agent_heartbeat(
            token=_token(request),
            agent=agent,
            config_version=data.get("config_version"),
            unreachable_since=data.get("unreachable_since"),
            stats=data.get("stats", {}),
        )
        return Response(serializers.AgentSerializer(agent).data)
