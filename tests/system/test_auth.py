"""Agents authenticate each other: a HELLO without the plane's secret is refused and logged,
and no secret or token is on any process's command line."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import pytest

from pdd_core.agent.protocol import FrameType, control, read_frame, write_frame
from pdd_core.agent.supervisor import DataPlane

pytestmark = pytest.mark.system


async def rogue_hello(host: str, port: int) -> tuple[str, bool]:
    """Connect like a gateway without the secret and ask for tokens."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        hello = {"role": "gateway", "agent_id": "intruder", "model": "tiny-test"}
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

    code, closed = asyncio.run(rogue_hello(spec.host, spec.port))

    assert code == "unauthenticated"
    assert closed
    log = tiny_plane.run_dir / "p-0.log"
    deadline = time.monotonic() + 10
    while "refused HELLO" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "refused HELLO" in log.read_text()
    assert "'intruder'" in log.read_text()


def test_no_secret_or_key_is_on_a_command_line(tiny_plane: DataPlane) -> None:
    secret = tiny_plane.secret_path.read_text().strip()

    for pid in tiny_plane.pids().values():
        argv = open(f"/proc/{pid}/cmdline", "rb").read().decode()  # noqa: SIM115
        assert secret not in argv
        assert tiny_plane.api_key not in argv
        assert "token" not in argv.lower()
    mode = stat.S_IMODE(os.stat(tiny_plane.secret_path).st_mode)
    assert mode == 0o600


async def late_frames_after_cancel(host: str, port: int, secret: bytes) -> dict[str, object]:
    """As P would after RLD cancelled: a KV_QUERY and a KV_DONE for a released request."""
    from pdd_core.agent.auth import PlaneAuth

    auth = PlaneAuth(secret)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        hello = auth.hello({"role": "prefill", "agent_id": "p-test", "model": "tiny-test"})
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

    seen = asyncio.run(late_frames_after_cancel(spec.host, spec.port, secret))

    assert seen == {"have": {"blocks": 0, "released": True}, "pong": "PONG"}
    assert "late-1" not in (tiny_plane.run_dir / "md-0.log").read_text()
