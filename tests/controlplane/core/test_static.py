"""Static assets are served by the app itself, so `make demo` needs no web server in front."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_stylesheet_is_served(client: Any) -> None:
    response = client.get("/static/frontend/site.css")

    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert b"--accent" in body
