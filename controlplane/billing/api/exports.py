"""CSV exports that hold every row of their filter, streamed in chunks.

A paginated list rendered as CSV would hold its first page only (50 rows, silently): a billing
import would miss the rest. Exports therefore ignore the page parameters and stream all rows of
the filter in id order, ``CHUNK_ROWS`` per query (keyset: ``id > last``), so memory stays flat
however many rows there are and rows arriving meanwhile never shift a page. Each row is the
list serializer's, so the CSV and the JSON carry the same columns and values.

Under ASGI (daphne) the body is an async iterator whose queries run in a worker thread; under
WSGI a plain one: Django would otherwise buffer the whole body to convert one into the other.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from rest_framework.serializers import Serializer

CHUNK_ROWS = 2000


def _chunks(queryset: QuerySet[Any], serializer: type[Serializer[Any]]) -> Iterator[str]:
    """The CSV text of ``queryset``: its header line, then ``CHUNK_ROWS`` rows at a time."""
    fields = list(serializer().fields)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    last = 0
    while True:
        rows = list(queryset.filter(pk__gt=last).order_by("pk")[:CHUNK_ROWS])
        if not rows:
            break
        writer.writerows(serializer(rows, many=True).data)
        last = rows[-1].pk
        yield _drain(out)
    yield _drain(out)  # the header alone when there are no rows


def _drain(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    step = sync_to_async(lambda: next(chunks, None), thread_sensitive=True)
    while (text := await step()) is not None:
        if text:
            yield text


def csv_export(
    request: HttpRequest,
    queryset: QuerySet[Any],
    serializer: type[Serializer[Any]],
    filename: str,
) -> StreamingHttpResponse:
    """Every row of ``queryset`` as CSV, streamed (see the module docstring)."""
    chunks = (text for text in _chunks(queryset, serializer) if text)
    body: Iterator[str] | AsyncIterator[str] = (
        _async_chunks(chunks) if isinstance(request, ASGIRequest) else chunks
    )
    response = StreamingHttpResponse(body, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
