"""Pagination with a client-chosen page size, bounded, and refused when it is not a size.

``page_size`` must be a positive integer (a 400 naming it otherwise: DRF alone would silently
use the default for ``abc`` or ``-3``); above ``max_page_size`` it is cut to that maximum, as
the schema says.
"""

from __future__ import annotations

from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


class StrictPageSize:
    """The ``page_size`` rule above, for any DRF paginator with ``page_size_query_param``."""

    page_size: int | None
    page_size_query_param: str | None
    max_page_size: int | None

    def get_page_size(self, request: Request) -> int | None:
        name = self.page_size_query_param
        raw = request.query_params.get(name, "") if name else ""
        if not raw:  # absent, or sent empty (read as absent, as everywhere in the API)
            return self.page_size
        if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
            raise ValidationError({str(name): [f"Expected a positive integer, got {raw!r}."]})
        return min(int(raw), self.max_page_size or int(raw))

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)  # type: ignore[misc]
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["minimum"] = 1
                parameter["description"] = (
                    f"Number of results to return per page (at most {self.max_page_size}; "
                    "a larger size is cut to it)."
                )
        return parameters


class PageNumberPagination(StrictPageSize, pagination.PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500
