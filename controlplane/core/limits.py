"""``BodySizeLimitMiddleware``: a request body over ``PDD_MAX_BODY_BYTES`` is answered 413 (the
error envelope under ``/api/``) from its ``Content-Length``, before it is read. (A body without a
length is not parsed by DRF at all, and Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``, set to the same
value, bounds what a form reads.) JSON limits are in ``parsers``.

``BodySizeLimitMiddleware`` also answers 400 to a path or query string holding a NUL character:
PostgreSQL text cannot hold one, so a filter with it would fail in the database.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from controlplane.core.errors import envelope


def _too_large(request: HttpRequest, limit: int) -> HttpResponse:
    message = f"Request body over {limit} bytes."
    if request.path.startswith("/api/"):
        return JsonResponse(envelope(413, "too_large", message), status=413)
    return HttpResponse(message, status=413, content_type="text/plain")


def _refused(request: HttpRequest, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(envelope(400, "invalid", message), status=400)
    return HttpResponse(message, status=400, content_type="text/plain")


class BodySizeLimitMiddleware:
    """413 for a request body over ``settings.MAX_BODY_BYTES``, before a view reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = int(settings.MAX_BODY_BYTES)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            return _too_large(request, limit)
        if "\x00" in request.path or any(
            "\x00" in key or any("\x00" in value for value in values)
            for key, values in request.GET.lists()
        ):
            return _refused(request, "The URL must not contain NUL (%00) characters.")
        return self.get_response(request)
