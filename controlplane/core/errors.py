"""One error envelope for every API error.

Every error the API returns, whatever raised it, has the shape::

    {"error": {"status": 400, "code": "invalid", "message": "...", "fields": {"name": ["..."]}}}

``fields`` is present (possibly empty) on every error so clients need no special case.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from controlplane.core.exceptions import ConflictError, DomainError
from pdd_core.errors import PddError

__all__ = ["ConflictError", "api_exception_handler", "envelope", "flatten_detail"]

logger = logging.getLogger(__name__)


def envelope(
    status_code: int, code: str, message: str, fields: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "error": {"status": status_code, "code": code, "message": message, "fields": fields or {}}
    }


def flatten_detail(detail: Any) -> Any:
    """DRF ErrorDetail trees -> plain strings, keeping nesting (lists and dicts)."""
    if isinstance(detail, dict):
        return {str(k): flatten_detail(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [flatten_detail(v) for v in detail]
    return str(detail)


def _first_message(fields: Any) -> str | None:
    if isinstance(fields, dict):
        for key, value in fields.items():
            inner = _first_message(value)
            if inner:
                return inner if key == "non_field_errors" else f"{key}: {inner}"
    if isinstance(fields, list):
        for value in fields:
            inner = _first_message(value)
            if inner:
                return inner
    if isinstance(fields, str):
        return fields
    return None


def _from_django_validation(exc: DjangoValidationError) -> exceptions.ValidationError:
    if hasattr(exc, "error_dict"):
        detail: Any = {
            ("non_field_errors" if k == "__all__" else k): v for k, v in exc.message_dict.items()
        }
    else:
        detail = {"non_field_errors": exc.messages}
    return exceptions.ValidationError(detail)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler producing the envelope; a service's domain error gets its status,
    Django's ValidationError becomes a 400, and so does a ``pdd_core`` error (``PddError``:
    the library refused the input it was handed, a scenario or a document, with a message
    naming the field)."""
    if isinstance(exc, DomainError):
        return Response(envelope(exc.status, exc.code, exc.message), status=exc.status)
    if isinstance(exc, PddError):
        return Response(envelope(400, "invalid", str(exc)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoValidationError):
        exc = _from_django_validation(exc)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled API error", exc_info=exc)
        return Response(
            envelope(500, "server_error", "Internal server error."),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    assert isinstance(exc, exceptions.APIException)
    codes = exc.get_codes()
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten_detail(
            exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        )
        message = _first_message(fields) or "Invalid input."
        response.data = envelope(response.status_code, "invalid", message, fields)
    else:
        code = codes if isinstance(codes, str) else exc.default_code
        response.data = envelope(response.status_code, str(code), str(exc.detail))
    return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or request.path.startswith("/metrics")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """JSON 404 under /api/, the usual page elsewhere."""
    if _is_api(request):
        return JsonResponse(envelope(404, "not_found", "No such endpoint."), status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(envelope(500, "server_error", "Internal server error."), status=500)
    from django.views.defaults import server_error as default

    return default(request)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(envelope(403, "permission_denied", "Forbidden."), status=403)
    from django.views.defaults import permission_denied as default

    return default(request, exception or PermissionDenied())
