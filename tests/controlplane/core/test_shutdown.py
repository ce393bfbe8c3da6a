"""SIGTERM to a real daphne with agent and dashboard sockets open: each socket is closed with
4503 (reconnect), a socket opened meanwhile is refused with it, and the process exits by itself
with status 0 (the watchdog of ``core.shutdown`` bounds it at 5 s; nothing here times it)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async

from controlplane.accounts.services import api_token_issue
from controlplane.agents.models import Agent
from controlplane.core.shutdown import CLOSE_RESTART
from tests import factories
from tests.live_server import ServerProcess, database_url

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(tmp_path: Path, django_db_blocker: Any) -> Iterator[ServerProcess]:
    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    process = ServerProcess(url, tmp_path / "data", tmp_path / "daphne.log")
    process.start()
    yield process
    process.stop()


def _world() -> tuple[str, str]:
    site = factories.site(slug="dc-a")
    agent = Agent.objects.create(name="gw", site=site, role="gateway")
    token = api_token_issue(name="a", scope="agent", site=site).secret
    viewer = api_token_issue(name="v", scope="viewer").secret
    return f"/ws/agents/{agent.pk}/?token={token}", f"/ws/live/?scope=all&token={viewer}"


async def _close_code(ws: Any) -> int | None:
    try:
        async for _ in ws:
            pass
    except websockets.ConnectionClosed:
        pass
    return ws.close_code


async def test_sigterm_closes_every_socket_with_the_reconnect_code_and_exits(
    server: ServerProcess,
) -> None:
    agent_path, live_path = await sync_to_async(_world)()
    base = server.url.replace("http", "ws")
    agent_ws = await websockets.connect(base + agent_path)
    live_ws = await websockets.connect(base + live_path)
    assert "config" in await agent_ws.recv()
    proc = server.proc
    assert proc is not None

    proc.send_signal(signal.SIGTERM)
    codes = await asyncio.gather(_close_code(agent_ws), _close_code(live_ws))
    try:  # a socket opened after SIGTERM, while the others close: refused the same way
        late = await websockets.connect(base + agent_path)
        late_code = await _close_code(late)
    except (OSError, websockets.InvalidHandshake, websockets.InvalidMessage):
        late_code = CLOSE_RESTART  # the listener was already gone: refused as well
    status = await asyncio.to_thread(proc.wait, 60)  # a hang guard, not a timing
    server.proc = None

    assert codes == [CLOSE_RESTART, CLOSE_RESTART]
    assert late_code == CLOSE_RESTART
    assert status == 0


def test_no_process_is_left_when_daphne_is_gone(server: ServerProcess) -> None:
    # SIGINT (Ctrl-C of make serve) ends it the same way: by itself, status 0
    proc = server.proc
    assert proc is not None
    proc.send_signal(signal.SIGINT)
    try:
        status = proc.wait(60)
    except subprocess.TimeoutExpired:  # pragma: no cover - the failure this test exists for
        proc.kill()
        raise
    server.proc = None
    assert status == 0
