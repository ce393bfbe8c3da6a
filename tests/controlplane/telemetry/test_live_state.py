"""``/ws/live/?state=``: the deployment's state read from the database, so that what another
process changes (an alert opened by the evaluator, an agent falling silent) reaches open pages
on every channel layer; one read per scope and interval per process."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from controlplane.asgi import application
from controlplane.telemetry import state
from controlplane.telemetry.models import Alert, SlaRule

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_state(settings: Any) -> None:
    settings.TELEMETRY_LIVE_STATE_INTERVAL_S = 0.1
    state.state_cache_clear()


def _open_alert() -> int:
    rule = SlaRule.objects.create(slug="ttft", name="TTFT", metric="ttft_p90", threshold=1.0)
    now = timezone.now()
    return int(Alert.objects.create(rule=rule, first_seen=now, last_seen=now, value=2.0,
                                    worst=2.0, threshold=1.0).pk)  # fmt: skip


def _socket(path: str, token: str) -> Any:
    return WebsocketCommunicator(
        application, path, headers=[(b"authorization", f"Bearer {token}".encode())]
    )


async def _receive_state(communicator: Any) -> dict[str, Any]:
    while True:
        message: dict[str, Any] = await communicator.receive_json_from(timeout=5)
        if message.get("event") == "state":
            return message


async def test_the_state_arrives_on_connect_and_follows_the_database(issue_token: Any) -> None:
    token = await sync_to_async(issue_token)("viewer")
    communicator = _socket("/ws/live/?scope=all&state=all", token)
    connected, _ = await communicator.connect(timeout=5)
    assert connected

    first = await _receive_state(communicator)
    # Written straight to the database, as the evaluator in another process does: no push.
    alert_id = await sync_to_async(_open_alert)()
    second = await _receive_state(communicator)
    await communicator.disconnect()

    assert first["open_alerts"] == []
    assert [a["id"] for a in second["open_alerts"]] == [alert_id]
    assert second["open_alerts"][0]["name"] == "TTFT"
    assert set(second["sla"]) == {"targets", "minute", "minute_start", "hour"}


async def test_no_state_is_sent_unless_asked(issue_token: Any) -> None:
    token = await sync_to_async(issue_token)("viewer")
    communicator = _socket("/ws/live/?scope=all", token)
    await communicator.connect(timeout=5)

    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


def test_a_process_reads_a_scopes_state_once_per_interval(
    settings: Any, django_assert_num_queries: Any
) -> None:
    settings.TELEMETRY_LIVE_STATE_INTERVAL_S = 60
    state.state_snapshot()

    with django_assert_num_queries(0):
        again = state.state_snapshot()

    assert again["event"] == "state"


def test_an_agent_that_stops_beating_turns_stale_in_the_state_without_any_event() -> None:
    from controlplane.agents.models import Agent
    from tests import factories

    site = factories.site(slug="dc-a")
    Agent.objects.create(name="md-0", site=site, role="main", registered_at=timezone.now(),
                         last_heartbeat_at=timezone.now() - timedelta(seconds=20))  # fmt: skip

    agents = state.state_read()["agents"]

    assert [(a["name"], a["status"], a["healthy"]) for a in agents] == [("md-0", "stale", False)]


def test_a_fresh_read_replaces_the_shared_snapshot(settings: Any) -> None:
    settings.TELEMETRY_LIVE_STATE_INTERVAL_S = 60
    state.state_snapshot()
    alert_id = _open_alert()

    cached = state.state_snapshot()
    fresh = state.state_snapshot(fresh=True)

    assert cached["open_alerts"] == []
    assert [a["id"] for a in fresh["open_alerts"]] == [alert_id]
    assert state.state_snapshot() == fresh
