"""Billing REST: CRUD for operators, reads for billing systems, each narrowed to the caller's
tenant when its token is bound to one (another tenant's objects answer 404, not 403, so their
existence does not leak)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, pagination, renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from controlplane.accounts.models import ApiToken, Scope
from controlplane.billing import selectors, services
from controlplane.billing.api import serializers
from controlplane.billing.api.exports import csv_export
from controlplane.billing.api.renderers import CsvRenderer
from controlplane.billing.invoicing import invoice_document
from controlplane.billing.models import ApiKey
from controlplane.billing.periods import (
    MAX_HOURLY_DAYS,
    PERIOD_PATTERN,
    parse_group_by,
    parse_period,
    parse_range,
)
from controlplane.core.api import ServiceModelViewSet
from controlplane.core.pagination import StrictPageSize
from controlplane.tenancy.models import Tenant

_F = TypeVar("_F", bound=Callable[..., Any])
BILLING_READ = frozenset({Scope.OPERATOR.value, Scope.BILLING.value})
BILLING_WRITE = frozenset({Scope.OPERATOR.value})


def bound_tenant_id(request: Request) -> int | None:
    """The tenant a billing token is bound to, or None (operators, unbound tokens: all)."""
    auth = getattr(request, "auth", None)
    return auth.tenant_id if isinstance(auth, ApiToken) else None


def visible_tenant(request: Request, slug: str) -> Tenant:
    """The tenant named ``slug`` if the caller may see it; 404 otherwise, unknown or not."""
    tenant = selectors.tenant_list(tenant_id=bound_tenant_id(request)).filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"No tenant {slug!r}.")
    return tenant


class BillingScoped:
    read_scopes = BILLING_READ
    write_scopes = BILLING_WRITE


class TenantViewSet(BillingScoped, ServiceModelViewSet):
    """Customers. Deleting a tenant with usage, keys or invoices is refused (409)."""

    serializer_class = serializers.TenantSerializer
    update_service = staticmethod(services.tenant_update)
    search_fields = ["slug", "name"]
    ordering_fields = ["slug", "name"]
    filterset_fields = ["is_active", "currency"]

    def get_queryset(self) -> QuerySet[Tenant]:
        return selectors.tenant_list(tenant_id=bound_tenant_id(self.request))


class ApiKeyViewSet(
    BillingScoped,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    """Gateway keys: created (the key is in the response, once), listed by prefix, revoked."""

    lookup_field = "prefix"
    lookup_value_regex = "[a-f0-9]+"
    filterset_fields = ["tenant__slug"]
    ordering_fields = ["name", "created_at", "last_used_at"]

    def get_queryset(self) -> QuerySet[ApiKey]:
        return selectors.api_key_list(tenant_id=bound_tenant_id(self.request))

    def get_serializer_class(self) -> Any:
        if self.action == "create":
            return serializers.ApiKeyCreatedSerializer
        return serializers.ApiKeySerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        incoming = serializers.ApiKeySerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        issued = services.api_key_create(
            tenant=incoming.validated_data["tenant"],
            name=incoming.validated_data["name"],
            expires_at=incoming.validated_data.get("expires_at"),
        )
        body = serializers.ApiKeySerializer(issued.api_key).data
        return Response({**body, "key": issued.secret}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=serializers.ApiKeySerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, prefix: str) -> Response:
        """Revoke the key; gateways drop it with their next configuration push."""
        key = services.api_key_revoke(api_key=self.get_object())
        return Response(serializers.ApiKeySerializer(key).data)


class PriceBookViewSet(BillingScoped, ServiceModelViewSet):
    """Price-book versions per model and currency (per million tokens). A version used by an
    issued invoice is never edited in place: 409, create a new version instead."""

    lookup_field = "pk"
    lookup_value_regex = "[0-9]+"
    queryset = selectors.price_book_list()
    serializer_class = serializers.PriceBookSerializer
    filterset_fields = ["currency", "model__slug"]
    ordering_fields = ["effective_from"]

    # Price books have no slug to announce, so the base class's writes are not reused.
    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        serializer.instance = services.price_book_create(serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        assert serializer.instance is not None
        serializer.instance = services.price_book_update(
            serializer.instance, serializer.validated_data
        )

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        services.price_book_delete(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class UsageCursorPagination(StrictPageSize, pagination.CursorPagination):
    """Stable pages over an append-only table however many rows arrive meanwhile."""

    ordering = "id"
    page_size_query_param = "page_size"
    max_page_size = 1000

    def decode_cursor(self, request: Request) -> pagination.Cursor | None:
        """DRF's cursor, whose position must be an id (a row id of the BIGINT column): any
        other is the same 404 as a cursor DRF cannot decode, not a query that fails."""
        cursor = super().decode_cursor(request)
        if cursor is None or cursor.position is None:
            return cursor
        position = str(cursor.position)
        if not (position.isascii() and position.isdigit()) or int(position) >= 2**63:
            raise NotFound(self.invalid_cursor_message)
        return cursor


RANGE_PARAMS = [
    OpenApiParameter("tenant", OpenApiTypes.STR, description="tenant slug"),
    OpenApiParameter("from", OpenApiTypes.STR, description="ISO date or date-time, inclusive"),
    OpenApiParameter("to", OpenApiTypes.STR, description="ISO date or date-time, exclusive"),
    OpenApiParameter("model", OpenApiTypes.STR, description="model slug"),
]


def _usage_scope(request: Request) -> tuple[Any, int | None, str | None]:
    """Parse tenant/from/to/model (400 naming the parameter) into a filtered queryset."""
    start, end = parse_range(
        request.query_params.get("from"), request.query_params.get("to"), timezone.now()
    )
    slug = request.query_params.get("tenant") or None
    tenant_id = bound_tenant_id(request)
    if slug is not None:
        tenant_id = visible_tenant(request, slug).pk
    qs = selectors.usage_filtered(
        tenant_id=tenant_id, start=start, end=end, model=request.query_params.get("model") or None
    )
    return (qs, start, end), tenant_id, slug


@extend_schema(parameters=RANGE_PARAMS, tags=["billing"])
class UsageRecordViewSet(BillingScoped, mixins.ListModelMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Raw usage records with cursor pagination; ``?format=csv`` streams every record of the
    filter as CSV (no pages: ``exports``)."""

    serializer_class = serializers.UsageRecordSerializer
    pagination_class = UsageCursorPagination
    filter_backends: list[Any] = []
    renderer_classes = [renderers.JSONRenderer, CsvRenderer]

    def get_queryset(self) -> QuerySet[Any]:
        (qs, _, _), _, _ = _usage_scope(self.request)
        scoped: QuerySet[Any] = qs.select_related("tenant")
        return scoped

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        if getattr(request.accepted_renderer, "format", None) == CsvRenderer.format:
            return csv_export(request._request, self.get_queryset(),
                              serializers.UsageRecordSerializer, "usage-records.csv")  # fmt: skip
        return super().list(request, *args, **kwargs)


class UsageView(BillingScoped, APIView):
    """Usage aggregated in the database by time bucket and dimensions, with an ETag.

    ``group_by`` is a comma-separated list: at most one of hour, day, month, plus any of
    model, site, pipeline, tenant (default ``day``). ``If-None-Match`` with the last ETag
    answers 304 after one cheap count query.
    """

    renderer_classes = [renderers.JSONRenderer, CsvRenderer]

    @extend_schema(
        parameters=[
            *RANGE_PARAMS,
            OpenApiParameter("group_by", OpenApiTypes.STR, description="e.g. day or day,model"),
        ],
        responses={
            (200, "application/json"): serializers.UsageSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            304: OpenApiResponse(description="not modified (If-None-Match)"),
            400: OpenApiResponse(description="malformed parameter"),
            404: OpenApiResponse(description="unknown tenant"),
        },
        tags=["billing"],
    )
    def get(self, request: Request) -> Response:
        bucket, dimensions = parse_group_by(request.query_params.get("group_by"))
        (qs, start, end), _, slug = _usage_scope(request)
        if bucket == "hour" and (end - start).days > MAX_HOURLY_DAYS:
            raise ValidationError(
                {"group_by": [f"Hourly buckets span at most {MAX_HOURLY_DAYS} days."]}
            )
        fmt = getattr(request, "accepted_renderer", None)
        params = f"{slug}|{start.isoformat()}|{end.isoformat()}|{bucket}|{dimensions}|" + (
            fmt.format if fmt else ""
        )
        etag = f'"{selectors.usage_fingerprint(qs, params)}"'
        if etag in {t.strip() for t in request.headers.get("If-None-Match", "").split(",")}:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        rows = selectors.usage_aggregate(qs, bucket=bucket, dimensions=dimensions)
        body = {
            "tenant": slug, "from": start, "to": end,
            "group_by": [*([bucket] if bucket else []), *dimensions],
            "results": serializers.UsageRowSerializer(rows, many=True).data,
        }  # fmt: skip
        data = serializers.UsageSerializer(body).data
        return Response(data, headers={"ETag": etag, "Cache-Control": "private, no-cache"})


PATH_PARAMS = [
    OpenApiParameter("tenant", OpenApiTypes.STR, OpenApiParameter.PATH, description="slug"),
    OpenApiParameter(
        "period",
        OpenApiTypes.STR,
        OpenApiParameter.PATH,
        description="YYYY-MM",
        pattern=PERIOD_PATTERN,
    ),
]


def invoice_schema(ok: int, *, conflict: str | None = None, **kwargs: Any) -> Callable[[_F], _F]:
    """The OpenAPI description of an invoice endpoint: the invoice on ``ok``, and its errors
    (a malformed period, a tenant the caller cannot see, ``conflict`` as the 409)."""
    errors = {400: OpenApiResponse(description="malformed period"),
              404: OpenApiResponse(description="unknown tenant")}  # fmt: skip
    if conflict is not None:
        errors[409] = OpenApiResponse(description=conflict)
    return extend_schema(
        parameters=PATH_PARAMS,
        responses={ok: serializers.InvoiceSerializer, **errors},
        tags=["billing"],
        **kwargs,
    )


class InvoiceView(BillingScoped, APIView):
    """A tenant's invoice for a month: the stored one once issued, else a draft.

    Lines per model and price-book version (late usage of issued months as ``adjustment``
    lines; usage no price book covers as a flagged line with ``priced`` false), totals (the
    exact sum of the rounded priced lines), the cache-hit saving and SLA attainment per model.
    """

    @invoice_schema(200)
    def get(self, request: Request, tenant: str, period: str) -> Response:
        month = parse_period(period)
        payload = invoice_document(tenant=visible_tenant(request, tenant), period=month)
        return Response(serializers.InvoiceSerializer(payload).data)


class InvoiceIssueView(BillingScoped, APIView):
    """Close a month for a tenant (operators): the invoice is stored and never changes."""

    @invoice_schema(201, conflict="already issued, or the month has not ended", request=None)
    def post(self, request: Request, tenant: str, period: str) -> Response:
        month = parse_period(period)
        customer = visible_tenant(request, tenant)
        invoice = services.invoice_issue(tenant=customer, period=month, issued_by=str(request.user))
        return Response(
            serializers.InvoiceSerializer(serializers.invoice_payload(invoice)).data,
            status=status.HTTP_201_CREATED,
        )
