"""A frame no WebSocket stream can read is refused with a close code (4415 for binary, 4400 for
text that is not JSON or nests deeper than the API allows), never by the server failing (1011);
an ack of a config version past the column's range is an error message, and the socket stays
open."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from controlplane.agents.models import Agent
from tests.controlplane.ws import communicator

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = "[" * 5000 + "]" * 5000
FRAMES = {
    "binary": ({"bytes_data": b"\x00\x01"}, 4415),
    "not JSON": ({"text_data": "{not json"}, 4400),
    "nested 5,000 deep": ({"text_data": DEEP}, 4400),
    "nested 33 deep": ({"text_data": "[" * 33 + "]" * 33}, 4400),
}


async def _path_and_token(stream: str, issue_token: Any) -> tuple[str, str]:
    if stream == "agents":
        token = await sync_to_async(issue_token)("agent")
        agent = await sync_to_async(Agent.objects.get)(name="gateway")  # the persona's gateway
        return f"/ws/agents/{agent.pk}/", token
    return f"/ws/{stream}/", await sync_to_async(issue_token)("operator")


async def _opened(stream: str, issue_token: Any) -> Any:
    path, token = await _path_and_token(stream, issue_token)
    ws = communicator(path, token)
    connected, _ = await ws.connect(timeout=5)
    assert connected
    if stream == "agents":
        assert (await ws.receive_json_from(timeout=5))["type"] == "config"
    return ws


@pytest.mark.parametrize("stream", ["agents", "live", "inventory"])
async def test_an_unreadable_frame_closes_with_a_protocol_code(
    issue_token: Any, stream: str
) -> None:
    codes = {}
    for frame, (sent, _) in FRAMES.items():
        ws = await _opened(stream, issue_token)
        await ws.send_to(**sent)
        closed = await ws.receive_output(timeout=5)
        codes[frame] = closed.get("code") if closed["type"] == "websocket.close" else closed
        await ws.disconnect(timeout=5)  # the client's side of the closing handshake

    assert codes == {frame: code for frame, (_, code) in FRAMES.items()}


async def test_an_ack_of_an_impossible_version_is_an_error_and_the_socket_stays_open(
    issue_token: Any,
) -> None:
    ws = await _opened("agents", issue_token)
    answers = []

    for version in (2**31, 2**80, -1, "7", True):
        await ws.send_to(text_data=json.dumps({"type": "ack", "version": version}))
        answers.append(await ws.receive_json_from(timeout=5))
    await ws.send_json_to({"type": "ping"})
    answered = await ws.receive_json_from(timeout=5)

    refused = {"type": "error", "message": "version: an integer from 0 to 2147483647 (a config "
               "version)"}  # fmt: skip
    assert answers == [refused] * 5
    assert answered == {"type": "pong"}
    agent = await sync_to_async(Agent.objects.get)(name="gateway")
    assert agent.config_version is None
    await ws.disconnect(timeout=5)
