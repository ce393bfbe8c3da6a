"""``/healthz`` answers while the process runs; ``/readyz`` answers 200 only while the database
and the channel layer answer, 503 naming the one that does not. Both need no credentials."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_credentials() -> None:
    response = Client().get("/healthz")

    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_checks_the_database_and_the_channel_layer() -> None:
    response = Client().get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok", "checks": {"database": "ok", "channel_layer": "ok"},
    }  # fmt: skip


def test_readyz_is_503_naming_the_database_when_it_does_not_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db.utils import OperationalError

    def down(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("connection to server at 10.0.0.5 (password=...) failed")

    monkeypatch.setattr(connection, "cursor", down)

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "error: OperationalError", "channel_layer": "ok"},
    }


def test_readyz_is_503_naming_the_channel_layer_when_it_does_not_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from controlplane.core import health

    monkeypatch.setattr(health, "get_channel_layer", lambda: None)

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok", "channel_layer": "error: RuntimeError",
    }  # fmt: skip


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_probes_take_only_safe_methods(method: str) -> None:
    assert getattr(Client(), method)("/healthz").status_code == 405
