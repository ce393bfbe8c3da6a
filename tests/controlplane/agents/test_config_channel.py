"""``/ws/agents/<id>/``: agents of their own site receive the config, push updates, and ack."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane.accounts.services import api_token_issue
from controlplane.agents.config import CONFIG_GROUP
from controlplane.agents.models import Agent
from controlplane.asgi import application
from controlplane.core.broadcast import broadcast
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _setup() -> tuple[int, str, str]:
    a, b = factories.site(slug="dc-a"), factories.site(slug="dc-b")
    agent = Agent.objects.create(name="md-0", site=a, role="main")
    own = api_token_issue(name="a", scope="agent", site=a).secret
    other = api_token_issue(name="b", scope="agent", site=b).secret
    return agent.pk, own, other


async def _connect(path: str, token: str | None) -> tuple[WebsocketCommunicator, bool, Any]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def test_agent_receives_config_on_connect_and_acks() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()

    ws, connected, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    first = await ws.receive_json_from(timeout=5)
    await ws.send_json_to({"type": "ack", "version": first["version"]})
    acked = await ws.receive_json_from(timeout=5)

    assert connected
    assert first["type"] == "config"
    assert set(first["config"]) >= {"version", "routing_table", "pools", "tenant_keys"}
    assert acked == {"type": "acked", "version": first["version"]}
    agent = await sync_to_async(Agent.objects.get)(pk=agent_id)
    assert agent.config_version == first["version"]
    await ws.disconnect()


async def test_a_push_to_config_all_reaches_connected_agents() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    await ws.receive_json_from(timeout=5)

    await sync_to_async(broadcast)(CONFIG_GROUP, {"event": "activated"}, force=True)
    pushed = await ws.receive_json_from(timeout=5)

    assert pushed["type"] == "config"
    await ws.disconnect()


async def test_other_sites_token_is_refused() -> None:
    agent_id, _, other = await sync_to_async(_setup)()

    _, connected, code = await _connect(f"/ws/agents/{agent_id}/", other)

    assert (connected, code) == (False, 4403)


async def test_unknown_agent_and_non_agent_scopes_are_refused(issue_token: Any) -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    viewer = await sync_to_async(issue_token)("viewer")

    _, connected_unknown, code_unknown = await _connect("/ws/agents/999999/", own)
    _, connected_viewer, code_viewer = await _connect(f"/ws/agents/{agent_id}/", viewer)
    _, connected_anon, code_anon = await _connect(f"/ws/agents/{agent_id}/", None)

    assert (connected_unknown, code_unknown) == (False, 4404)
    assert (connected_viewer, code_viewer) == (False, 4403)
    assert (connected_anon, code_anon) == (False, 4401)


async def test_malformed_ack_is_answered_not_applied() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    await ws.receive_json_from(timeout=5)

    await ws.send_json_to({"type": "ack", "version": "seven"})
    answer = await ws.receive_json_from(timeout=5)

    assert answer["type"] == "error"
    agent = await sync_to_async(Agent.objects.get)(pk=agent_id)
    assert agent.config_version is None
    await ws.disconnect()
