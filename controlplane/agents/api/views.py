"""Agent REST endpoints: register and heartbeat (agent tokens); the registry (operators); each
site's desired state (its agents, operators, viewers) and operators' overrides of one pool."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.accounts.models import ApiToken, Scope
from controlplane.accounts.permissions import request_scope
from controlplane.agents import selectors, services
from controlplane.agents.api import serializers
from controlplane.agents.config import current_version
from controlplane.agents.desired import site_desired
from controlplane.agents.models import Agent, AgentStatus, PoolOverride
from controlplane.inventory.models import Site
from controlplane.planning.api.views import caller_name


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
        if params.get("status"):
            if params["status"] not in AgentStatus.values:
                raise ValidationError(
                    {"status": [f"Expected one of {', '.join(AgentStatus.values)}."]}
                )
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
        request=serializers.RegisterSerializer,
        responses={
            201: serializers.RegisteredSerializer,
            409: OpenApiResponse(description="the agent's name is registered in another site"),
        },
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
            state=data.get("state", ""),
            pool=data.get("pool", ""),
        )
        return Response(serializers.AgentSerializer(agent).data)


def _site(slug: str) -> Site:
    return get_object_or_404(Site, slug=slug)


class SiteDesiredView(APIView):
    """``GET /api/v1/sites/{slug}/desired/``: what the site's reconciler must run (the active
    plan's pools there, operators' overrides applied). Agents read their own site's only;
    operators and viewers read any."""

    read_scopes = frozenset({Scope.OPERATOR.value, Scope.VIEWER.value, Scope.AGENT.value})
    write_scopes = frozenset[str]()

    @extend_schema(responses=serializers.DesiredStateSerializer)
    def get(self, request: Request, slug: str) -> Response:
        site = _site(slug)
        if request_scope(request) == Scope.AGENT:
            services.ensure_token_site(_token(request), site)
        return Response(site_desired(site).to_dict())


class PoolOverridesView(APIView):
    """``GET /api/v1/sites/{slug}/desired/overrides/``: every override of the site's pools,
    newest first, cleared ones included (the audit trail)."""

    @extend_schema(responses=serializers.PoolOverrideSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        rows = PoolOverride.objects.filter(site=_site(slug)).select_related("site")[:200]
        return Response(serializers.PoolOverrideSerializer(rows, many=True).data)


class PoolOverrideView(APIView):
    """``POST`` (operators) sets one pool's instance count in a site, ``DELETE`` gives it back
    its plan's count; the config version does not change."""

    @extend_schema(
        request=serializers.PoolOverrideSetSerializer,
        responses={
            201: serializers.PoolOverrideSerializer,
            409: OpenApiResponse(description="no plan is active: no desired pool to override"),
        },
    )
    def post(self, request: Request, slug: str, pool: str) -> Response:
        body = serializers.PoolOverrideSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        override = services.pool_override_set(
            site=_site(slug),
            pool=pool,
            instances=body.validated_data["instances"],
            reason=body.validated_data["reason"],
            set_by=caller_name(request),
        )
        return Response(
            serializers.PoolOverrideSerializer(override).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, slug: str, pool: str) -> Response:
        services.pool_override_clear(site=_site(slug), pool=pool, cleared_by=caller_name(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
