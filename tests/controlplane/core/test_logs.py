"""An expected refusal is one line in the web process's log; a server error keeps its
traceback (the console handler's filter, ``core.logs``)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.core.logs import ClientErrorsOneLine


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """What the configured console handler writes, captured."""
    handler = next(
        h for h in logging.getLogger().handlers
        if any(isinstance(f, ClientErrorsOneLine) for f in h.filters)
    )  # fmt: skip
    assert isinstance(handler, logging.StreamHandler)
    captured = io.StringIO()
    previous = handler.setStream(captured)
    yield captured
    handler.setStream(previous)


def test_a_viewer_refused_by_a_page_is_one_line(viewer_browser: Any, console: io.StringIO) -> None:
    response = viewer_browser.post("/alerts/", {"slug": "x"})

    assert response.status_code == 403
    assert console.getvalue().splitlines() == ["Forbidden (Permission denied): /alerts/"]


def test_a_server_error_keeps_its_traceback(console: io.StringIO) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("django.request").error(
            "Internal Server Error: /x", exc_info=True, extra={"status_code": 500}
        )

    lines = console.getvalue().splitlines()
    assert lines[0] == "Internal Server Error: /x"
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "RuntimeError: boom"
