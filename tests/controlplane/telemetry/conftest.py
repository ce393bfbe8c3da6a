"""Telemetry fixtures: a tenant ``acme`` (billable: with its factory key, and the factory
records' model in the inventory) and records finishing at a chosen instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.core import broadcast
from tests import factories

# A fixed instant aligned to a minute, so every record below lands in known windows.
T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def acme(db: Any) -> Any:
    return factories.record_world("acme")["acme"]


@pytest.fixture(autouse=True)
def _fresh_throttle() -> None:
    broadcast.throttle_reset()


def record_at(when: datetime, **kw: Any) -> dict[str, Any]:
    """A factory record that finishes at ``when`` (arrival 10 s earlier: long enough for the
    TTFTs the tests report)."""
    iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
    return factories.request_record(
        arrival_time=iso(when - timedelta(seconds=10)), finish_time=iso(when), **kw
    )
