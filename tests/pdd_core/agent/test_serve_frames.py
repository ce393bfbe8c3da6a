"""``serve_frames``: a peer that leaves while its frame is being answered is not a handler bug."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pdd_core.agent.auth import PlaneAuth
from pdd_core.agent.protocol import Frame, FrameType, control, encode_frame, read_frame
from pdd_core.agent.runtime import Conn, bound_address, hello, serve_frames

SECRET = b"s3cret"


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = PlaneAuth(SECRET).hello(
        hello("gateway", "gw-test", "m").body, to_role="prefill", to_agent="p-test"
    )
    writer.write(encode_frame(control(FrameType.HELLO, "", body)))
    await writer.drain()
    ack = await read_frame(reader)
    assert ack is not None and ack.type is FrameType.HELLO_ACK
    return reader, writer


async def test_a_peer_gone_before_its_answer_ends_the_connection_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answering = asyncio.Event()
    closed: list[Conn] = []

    async def handler(conn: Conn, frame: Frame) -> None:
        answering.set()
        await asyncio.sleep(0.2)  # the peer hangs up meanwhile
        for _ in range(50):  # a closed socket fails a write once its buffer is refused
            await conn.send(control(FrameType.PONG, frame.request_id, {"pad": "x" * 65536}))

    me = hello("prefill", "p-test", "m")
    server = await serve_frames(
        "127.0.0.1", 0, me, handler, closed.append, auth=PlaneAuth(SECRET), tls=None
    )
    try:
        _, writer = await _connect(bound_address(server)[1])
        writer.write(encode_frame(control(FrameType.PING, "ping-1")))
        await writer.drain()
        await asyncio.wait_for(answering.wait(), 5)
        writer.transport.abort()  # gone, as a gateway that stops
        with caplog.at_level(logging.INFO, logger="pdd_core.agent.runtime"):
            for _ in range(100):
                if closed:
                    break
                await asyncio.sleep(0.05)
    finally:
        server.close()
        await server.wait_closed()

    assert len(closed) == 1 and closed[0].closed
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_a_handler_error_about_another_connection_is_still_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answered = asyncio.Event()

    async def handler(conn: Conn, frame: Frame) -> None:
        try:
            raise ConnectionError("send to md-0: connection reset")  # a peer link's failure
        finally:
            answered.set()

    server = await serve_frames(
        "127.0.0.1", 0, hello("prefill", "p-test", "m"), handler, auth=PlaneAuth(SECRET), tls=None
    )
    try:
        _, writer = await _connect(bound_address(server)[1])
        with caplog.at_level(logging.INFO, logger="pdd_core.agent.runtime"):
            writer.write(encode_frame(control(FrameType.PING, "ping-2")))
            await writer.drain()
            await asyncio.wait_for(answered.wait(), 5)
            await asyncio.sleep(0.05)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()

    assert "handler failed on PING ping-2" in caplog.text
