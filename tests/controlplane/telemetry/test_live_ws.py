"""``/ws/live/``: login or token, viewer and operator scopes, subscriptions per scope, pushes
throttled per group through the one broadcast helper, and only the windows that changed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane.asgi import application
from controlplane.telemetry.services import records_ingest
from tests.controlplane.telemetry.conftest import T0, record_at
from tests.controlplane.ws import refusal_code

pytestmark = pytest.mark.django_db(transaction=True)


async def _connect(path: str, token: str | None = None) -> tuple[Any, bool, Any]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def _ingest(records: list[dict[str, Any]]) -> None:
    await sync_to_async(records_ingest)(records=records)


async def test_anonymous_is_closed_with_4401() -> None:
    code = await refusal_code("/ws/live/?scope=all")

    assert code == 4401


@pytest.mark.parametrize("scope", ["billing", "agent"])
async def test_other_scopes_are_closed_with_4403(issue_token: Any, scope: str) -> None:
    token = await sync_to_async(issue_token)(scope)

    code = await refusal_code("/ws/live/?scope=all", token)

    assert code == 4403


async def test_session_login_is_accepted(django_user_model: Any) -> None:
    from django.test import Client

    def login_cookie() -> str:
        user = django_user_model.objects.create_user("eve", password="pw-eve-123456")
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    cookie = await sync_to_async(login_cookie)()
    communicator = WebsocketCommunicator(
        application, "/ws/live/?scope=all", headers=[(b"cookie", f"sessionid={cookie}".encode())]
    )
    connected, _ = await communicator.connect(timeout=5)

    assert connected
    await communicator.disconnect()


async def test_viewer_receives_only_the_windows_a_batch_changed(
    issue_token: Any, acme: Any
) -> None:
    token = await sync_to_async(issue_token)("viewer")
    communicator, connected, _ = await _connect("/ws/live/?scope=all", token)
    assert connected

    await _ingest([record_at(T0 + timedelta(seconds=6), request_id="a")])
    message = await communicator.receive_json_from(timeout=5)

    assert message["event"] == "points"
    assert (message["scope"], message["key"]) == ("all", "")
    assert sorted((p["window"], p["start"]) for p in message["points"]) == [
        ("1m", "2026-01-05T10:00:00Z"), ("5s", "2026-01-05T10:00:05Z")]  # fmt: skip
    five = next(p for p in message["points"] if p["window"] == "5s")
    assert (five["requests"], five["hit_token_weighted"], five["ttft_p50"] is not None) == (
        1, 0.9, True)  # fmt: skip
    await communicator.disconnect()


async def test_site_subscriber_gets_its_site_only(issue_token: Any, acme: Any) -> None:
    token = await sync_to_async(issue_token)("operator")
    communicator, connected, _ = await _connect("/ws/live/", token)
    assert connected
    await communicator.send_json_to({"action": "subscribe", "scope": "site", "key": "dc-b"})
    assert await communicator.receive_json_from(timeout=5) == {
        "event": "subscribed", "group": "live.site.dc-b"}  # fmt: skip

    await _ingest([record_at(T0, request_id="a", site="dc-a")])
    assert await communicator.receive_nothing(timeout=0.3)
    await _ingest([record_at(T0, request_id="b", site="dc-b")])
    message = await communicator.receive_json_from(timeout=5)

    assert (message["scope"], message["key"]) == ("site", "dc-b")
    assert {p["requests"] for p in message["points"]} == {1}
    await communicator.disconnect()


async def test_bad_subscription_gets_an_error(issue_token: Any) -> None:
    token = await sync_to_async(issue_token)("viewer")
    communicator, _, _ = await _connect("/ws/live/", token)

    await communicator.send_json_to({"action": "subscribe", "scope": "site"})
    reply = await communicator.receive_json_from(timeout=5)

    assert reply["error"]["code"] == "invalid"
    await communicator.disconnect()


async def test_pushes_to_one_group_are_throttled(
    issue_token: Any, acme: Any, settings: Any
) -> None:
    settings.TELEMETRY_LIVE_MIN_INTERVAL_S = 3600  # no second push within this test
    token = await sync_to_async(issue_token)("viewer")
    everything, _, _ = await _connect("/ws/live/?scope=all", token)
    tenant, _, _ = await _connect("/ws/live/?scope=tenant:acme", token)

    await _ingest([record_at(T0, request_id="a")])
    first = await everything.receive_json_from(timeout=5)
    await tenant.receive_json_from(timeout=5)
    await _ingest([record_at(T0, request_id="b")])

    assert first["points"][0]["requests"] == 1
    assert await everything.receive_nothing(timeout=0.3)  # dropped by the throttle
    assert await tenant.receive_nothing(timeout=0.3)
    await everything.disconnect()
    await tenant.disconnect()


@pytest.mark.redis
def test_redis_layer_reads_longer_than_its_blocking_pop() -> None:
    """Otherwise an idle /ws/live/ socket dies with 1011 after 5 s without a message."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()

    assert layer.hosts[0]["socket_timeout"] > layer.brpop_timeout


def test_points_are_built_only_for_groups_the_throttle_lets_through(
    acme: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controlplane.core.broadcast import broadcast_due
    from controlplane.telemetry import live
    from controlplane.telemetry.models import TelemetryRollup

    settings.TELEMETRY_LIVE_MIN_INTERVAL_S = 3600
    records_ingest(records=[record_at(T0, request_id="a")])  # pushes every group once
    built: list[str] = []
    point_of = live.point_of

    def counting_point_of(row: Any, rates: Any) -> Any:
        built.append(row.scope)
        return point_of(row, rates)

    monkeypatch.setattr(live, "point_of", counting_point_of)
    rows = list(TelemetryRollup.objects.all())

    assert not broadcast_due(live.live_group("all"), 3600)
    assert broadcast_due(live.live_group("all"), 0)
    assert (live.live_publish(rows), built) == (0, [])
    settings.TELEMETRY_LIVE_MIN_INTERVAL_S = 0
    assert live.live_publish(rows) == 4  # all, its site, pipeline and tenant; 2 windows each
    assert len(built) == 8
