"""Agents authenticate each other: every connection is TLS with a certificate of the plane
(plain text is refused at every port), a HELLO without the plane's secret, or meant for
another agent, is refused and logged, and no secret or token is on any process's command
line."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from typing import Any

import pytest

from pdd_core.agent.protocol import FrameType, control, encode_frame, read_frame, write_frame
from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.agent.tls import TlsContexts
from tests.system.conftest import wait_until

pytestmark = pytest.mark.system


def tls_of(plane: DataPlane, agent: str, peer: str) -> dict[str, Any]:
    """``open_connection`` arguments for a TLS connection to ``peer`` with ``agent``'s
    certificate of the plane (an insider: a certificate, but perhaps not the secret)."""
    context = TlsContexts.load(plane.tls_dir, agent).client
    return {"ssl": context, "server_hostname": peer}


async def rogue_hello(host: str, port: int, tls: dict[str, Any]) -> tuple[str, bool]:
    """Connect like a gateway without the secret and ask for tokens."""
    reader, writer = await asyncio.open_connection(host, port, **tls)
    try:
        hello = {"role": "gateway", "agent_id": "gateway", "model": "tiny-test"}
        await write_frame(writer, control(FrameType.HELLO, "", hello))
        answer = await asyncio.wait_for(read_frame(reader), 5)
        body = {"prompt_tokens": [1, 2, 3], "max_tokens": 4, "pipeline": "P-RLD"}
        try:
            await write_frame(writer, control(FrameType.GENERATE, "rogue-1", body))
            after = await asyncio.wait_for(read_frame(reader), 5)
        except (ConnectionError, OSError):
            after = None
        assert answer is not None
        return str(answer.body.get("code")), after is None
    finally:
        writer.close()


def test_a_hello_without_the_plane_secret_is_refused_and_logged(tiny_plane: DataPlane) -> None:
    spec = tiny_plane.config.agent("p-0")

    code, closed = asyncio.run(rogue_hello(spec.host, spec.port, tls_of(tiny_plane, "gateway",
                                                                          "p-0")))  # fmt: skip

    assert code == "unauthenticated"
    assert closed
    log = tiny_plane.run_dir / "p-0.log"
    deadline = time.monotonic() + 10
    while "refused HELLO" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "refused HELLO" in log.read_text()
    assert "no proof of the plane secret" in log.read_text()


def test_no_secret_or_key_is_on_a_command_line(tiny_plane: DataPlane) -> None:
    secret = tiny_plane.secret_path.read_text().strip()

    for pid in tiny_plane.pids().values():
        argv = open(f"/proc/{pid}/cmdline", "rb").read().decode()  # noqa: SIM115
        assert secret not in argv
        assert tiny_plane.api_key not in argv
        assert "token" not in argv.lower()
    mode = stat.S_IMODE(os.stat(tiny_plane.secret_path).st_mode)
    assert mode == 0o600


async def late_frames_after_cancel(
    host: str, port: int, secret: bytes, tls: dict[str, Any]
) -> dict[str, object]:
    """As P would after RLD cancelled: a KV_QUERY and a KV_DONE for a released request."""
    from pdd_core.agent.auth import PlaneAuth

    auth = PlaneAuth(secret)
    reader, writer = await asyncio.open_connection(host, port, **tls)
    try:
        body = {"role": "prefill", "agent_id": "p-1", "model": "tiny-test"}
        hello = auth.hello(body, to_role="main", to_agent="md-0")
        await write_frame(writer, control(FrameType.HELLO, "", hello))
        ack = await asyncio.wait_for(read_frame(reader), 5)
        assert ack is not None
        auth.check_ack(ack.body, hello)
        await write_frame(writer, control(FrameType.CANCEL, "late-1", {"reason": "done"}))
        await write_frame(writer, control(FrameType.KV_QUERY, "late-1", {"block_hashes": [1]}))
        have = await asyncio.wait_for(read_frame(reader), 5)
        done = {"blocks": 1, "tokens": 3, "first_token": 5}
        await write_frame(writer, control(FrameType.KV_DONE, "late-1", done))
        await write_frame(writer, control(FrameType.PING, "after"))
        pong = await asyncio.wait_for(read_frame(reader), 5)
        assert have is not None and pong is not None
        return {"have": dict(have.body), "pong": pong.type.name}
    finally:
        writer.close()


def test_late_kv_frames_after_a_cancel_never_revive_the_request(tiny_plane: DataPlane) -> None:
    spec = tiny_plane.config.agent("md-0")
    secret = tiny_plane.secret_path.read_text().strip().encode()

    seen = asyncio.run(
        late_frames_after_cancel(spec.host, spec.port, secret, tls_of(tiny_plane, "p-1", "md-0"))
    )

    assert seen == {"have": {"blocks": 0, "released": True}, "pong": "PONG"}
    assert "late-1" not in (tiny_plane.run_dir / "md-0.log").read_text()


async def first_answer(host: str, port: int, raw: bytes, tls: dict[str, Any]) -> tuple[str, str]:
    """Send ``raw`` (a HELLO frame's bytes) as the first frame; (answer type, error code)."""
    reader, writer = await asyncio.open_connection(host, port, **tls)
    try:
        writer.write(raw)
        await writer.drain()
        answer = await asyncio.wait_for(read_frame(reader), 5)
        assert answer is not None
        return answer.type.name, str(answer.body.get("code", ""))
    finally:
        writer.close()


def test_a_hello_captured_on_one_agent_is_refused_by_every_other(tiny_plane: DataPlane) -> None:
    from pdd_core.agent.auth import PlaneAuth

    # Given: a gateway's HELLO to p-0, as it crossed the wire (an insider's capture, who also
    # holds the gateway's certificate: TLS alone would not stop it).
    auth = PlaneAuth(tiny_plane.secret_path.read_text().strip().encode())
    body = {"role": "gateway", "agent_id": "gateway", "model": "tiny-test"}
    raw = encode_frame(control(FrameType.HELLO, "", auth.hello(body, to_role="prefill",
                                                                to_agent="p-0")))  # fmt: skip
    address = {a.id: (a.host, a.port) for a in tiny_plane.config.agents}

    async def replay() -> dict[str, tuple[str, str]]:
        def to(agent: str) -> tuple[str, int, bytes, dict[str, Any]]:
            return (*address[agent], raw, tls_of(tiny_plane, "gateway", agent))

        first = await first_answer(*to("p-0"))
        others = {agent: await first_answer(*to(agent)) for agent in ("p-1", "rld-0", "md-0")}
        return {"p-0": first, **others, "p-0 again": await first_answer(*to("p-0"))}

    # When: the same bytes are replayed to the other agents, and to p-0 again.
    answers = asyncio.run(replay())

    # Then: p-0 took it once; everyone else, and p-0 a second time, refused it.
    assert answers == {"p-0": ("HELLO_ACK", ""), "p-1": ("ERROR", "unauthenticated"),
                       "rld-0": ("ERROR", "unauthenticated"), "md-0": ("ERROR", "unauthenticated"),
                       "p-0 again": ("ERROR", "unauthenticated")}  # fmt: skip
    logs = {a: (tiny_plane.run_dir / f"{a}.log").read_text() for a in ("p-1", "md-0", "p-0")}
    assert "meant for another agent ('p-0', 'prefill')" in logs["p-1"]
    assert "meant for another agent" in logs["md-0"]
    assert "replayed HELLO" in logs["p-0"]


async def plain_answer(host: str, port: int) -> bytes:
    """What a listener answers a HELLO sent in plain text (b"": it closed the connection)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        body = {"role": "gateway", "agent_id": "gateway", "model": "tiny-test"}
        await write_frame(writer, control(FrameType.HELLO, "", body))
        return await asyncio.wait_for(reader.read(), 10)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


def test_a_plain_text_connection_to_any_agent_port_is_refused(tiny_plane: DataPlane) -> None:
    # The shipped topology's defaults: TLS on every connection, within the site and across.
    assert tiny_plane.config.tls.within_sites
    ports = {a.id: (a.host, a.port) for a in tiny_plane.config.agents if a.role != "gateway"}
    wan = tiny_plane.config.wan
    ports |= {f"wan route to {agent}": (wan.host, port) for agent, port in wan.routes.items()}
    ports["wan control"] = tiny_plane.wan_control

    async def all_ports() -> dict[str, bytes]:
        return {name: await plain_answer(*address) for name, address in ports.items()}

    answers = asyncio.run(all_ports())

    assert answers == dict.fromkeys(ports, b"")  # closed without a byte of answer
    for agent in ("p-0", "p-1", "rld-0", "md-0", "md-1", "wan"):
        log = tiny_plane.run_dir / f"{agent}.log"
        assert wait_until(lambda log=log: "refused a connection from" in log.read_text(), 10), agent
    # The operator's certificate and the token still work, over TLS.
    assert tiny_plane.wan_request("GET", "/counters")[0] == 200
