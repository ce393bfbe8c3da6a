"""CSV for spreadsheets and billing imports: the rows of ``results`` (or of a list)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework import renderers


class CsvRenderer(renderers.BaseRenderer):
    """One header line from the first row's keys; an error envelope becomes one CSV row."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if isinstance(data, dict) and "error" in data:
            error = data["error"]
            rows: list[dict[str, Any]] = [
                {"status": error["status"], "code": error["code"], "message": error["message"]}
            ]
        elif isinstance(data, dict):
            rows = list(data.get("results", []))
        elif isinstance(data, list):
            rows = data
        else:
            rows = []
        # No rows: one empty line (an empty body would lose its Content-Type on the way out).
        out = io.StringIO("" if rows else "\n")
        out.seek(0, io.SEEK_END)
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return out.getvalue().encode(self.charset)
