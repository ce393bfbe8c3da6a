"""Plans and workloads over REST: create (202, computed by Celery), poll, activate; the active
configuration for agents. Views validate, call one service or selector, and serialize."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from controlplane.accounts.models import ApiToken, Scope
from controlplane.core.parsers import JSONParser
from controlplane.planning import selectors, services, sweep_services
from controlplane.planning.api.serializers import (
    ActiveConfigSerializer,
    PlanAcceptedSerializer,
    PlanCreateSerializer,
    PlanSerializer,
    SweepCreateSerializer,
    SweepSerializer,
    WorkloadCreateSerializer,
    WorkloadProfileSerializer,
)
from controlplane.planning.models import JobState, Plan, WorkloadProfile, WorkloadSource


def caller_name(request: Request) -> str:
    """Who asked: the token's name or the browser user's name."""
    if isinstance(request.auth, ApiToken):
        return f"token:{request.auth.name}"
    user = getattr(request, "user", None)
    return str(user.get_username()) if user is not None and user.is_authenticated else ""


class JobViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    """A job a worker computes (a plan, a sweep): ``POST`` validates the request with
    ``create_serializer_class``, queues the job and answers 202 with where to poll it."""

    create_serializer_class: type[Serializer]  # type: ignore[type-arg]
    detail_route: str

    def get_serializer_class(self) -> Any:
        if self.action == "create":
            return self.create_serializer_class
        return super().get_serializer_class()

    def request_job(self, data: dict[str, Any], requested_by: str) -> JobState:
        """Queue the job that ``data`` (validated) asks for."""
        raise NotImplementedError

    @extend_schema(
        responses={202: PlanAcceptedSerializer, 400: OpenApiResponse(description="bad input")}
    )
    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = self.request_job(serializer.validated_data, caller_name(request))
        url = reverse(self.detail_route, kwargs={"pk": job.pk})
        return Response(
            {"id": job.pk, "status": job.status, "url": url}, status=status.HTTP_202_ACCEPTED
        )


class PlanViewSet(JobViewSet):
    """Plans: ``POST`` queues one (202), ``GET`` polls status, progress and result,
    ``POST .../activate/`` (operator) makes it the active configuration."""

    serializer_class = PlanSerializer
    create_serializer_class = PlanCreateSerializer
    detail_route = "plan-detail"
    filterset_fields = ("status", "active", "scenario")
    ordering_fields = ("id", "created_at", "version")

    def get_queryset(self) -> Any:
        return selectors.plan_list()

    def request_job(self, data: dict[str, Any], requested_by: str) -> JobState:
        return services.plan_request(
            scenario=data["scenario"], workload=data.get("workload"), requested_by=requested_by
        )

    @extend_schema(
        request=None,
        responses={
            200: PlanSerializer,
            409: OpenApiResponse(description="not done, infeasible, or already active"),
        },
    )
    @action(detail=True, methods=["post"])
    def activate(self, request: Request, pk: str | None = None) -> Response:
        plan: Plan = self.get_object()
        plan = services.plan_activate(plan=plan, activated_by=caller_name(request))
        return Response(PlanSerializer(plan).data)


class WorkloadViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    """Workload profiles: upload a trace (multipart ``file``; size limit, format errors by
    line), or take a scenario's workload, or a window of live telemetry."""

    serializer_class = WorkloadProfileSerializer
    parser_classes = (MultiPartParser, FormParser, JSONParser)
    filterset_fields = ("source",)

    def get_queryset(self) -> Any:
        return selectors.workload_list()

    @extend_schema(
        request={
            "multipart/form-data": WorkloadCreateSerializer,
            "application/json": WorkloadCreateSerializer,
        },
        responses={201: WorkloadProfileSerializer, 400: OpenApiResponse(description="bad input")},
    )
    def create(self, request: Request) -> Response:
        serializer = WorkloadCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        who = caller_name(request)
        workload: WorkloadProfile
        if data["source"] == WorkloadSource.TRACE:
            upload = data["file"]
            if upload.size > services.max_trace_bytes():
                from rest_framework.exceptions import ValidationError

                raise ValidationError(
                    {"file": [f"The trace is {upload.size} bytes; the limit is "
                              f"{services.max_trace_bytes()}."]}
                )  # fmt: skip
            workload = services.workload_create_from_trace(
                name=data["name"], content=upload.read(), filename=upload.name, created_by=who
            )
        elif data["source"] == WorkloadSource.SCENARIO:
            workload = services.workload_create_from_scenario(
                name=data["name"], scenario=data["scenario"], created_by=who
            )
        else:
            workload = services.workload_create_from_telemetry(
                name=data["name"], minutes=data["telemetry_minutes"], created_by=who
            )
        return Response(WorkloadProfileSerializer(workload).data, status=status.HTTP_201_CREATED)


class SweepViewSet(JobViewSet):
    """Capacity sweeps: ``POST`` queues one (202; one Celery task per point), ``GET`` polls its
    progress and, once done, its table. Operators write, viewers read (like plans)."""

    serializer_class = SweepSerializer
    create_serializer_class = SweepCreateSerializer
    detail_route = "sweep-detail"
    filterset_fields = ("status",)
    ordering_fields = ("id", "created_at")

    def get_queryset(self) -> Any:
        return selectors.sweep_list()

    def request_job(self, data: dict[str, Any], requested_by: str) -> JobState:
        return sweep_services.sweep_request(
            scenarios=data["scenarios"],
            policies=data["policies"],
            wan_gbps=data["wan_gbps"],
            iterations=data["capacity_iterations"],
            requested_by=requested_by,
        )


class ActiveConfigView(APIView):
    """The routing table and pool assignment the data plane must run (404 before any
    activation). Operators, viewers and agents may read it."""

    read_scopes = frozenset({Scope.OPERATOR.value, Scope.VIEWER.value, Scope.AGENT.value})
    write_scopes = frozenset[str]()

    @extend_schema(
        responses={200: ActiveConfigSerializer, 404: OpenApiResponse(description="none active")}
    )
    def get(self, request: Request) -> Response:
        config = selectors.active_config()
        if config is None:
            raise Http404("No plan has been activated yet.")
        return Response(ActiveConfigSerializer(config).data)
