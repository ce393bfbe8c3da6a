"""Connections every agent process shares: the ones it serves and the ones it opens.

Agents talk over long-lived TCP connections that carry many requests' frames (multiplexed by
request id). ``Conn`` is one such connection with a send lock; ``serve_frames`` accepts
connections, exchanges HELLO and feeds each frame to a handler; ``PeerLink`` is an outgoing
connection that (re)connects on demand within a bounded time and reports frames and its own
death to its owner, so a dead peer fails its requests at once instead of leaving them hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from pdd_core.agent.auth import AuthError, PlaneAuth
from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.protocol import (
    Frame,
    FrameType,
    ProtocolError,
    control,
    encode_frame,
    read_frame,
    write_frame,
)
from pdd_core.agent.tls import check_peer, serve_tls

log = logging.getLogger(__name__)


def bound_address(server: asyncio.Server) -> tuple[str, int]:
    """Where a started server listens (the real port when it was asked for port 0)."""
    host, port = server.sockets[0].getsockname()[:2]
    return str(host), int(port)


FrameHandler = Callable[["Conn", Frame], Awaitable[None]]
HELLO_TIMEOUT_S = 5.0
READ_LIMIT = 1 << 22


class Conn:
    """One agent-to-agent connection: frames are written whole, one sender at a time."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: dict[str, Any]
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.peer = peer
        self.closed = False
        self._lock = asyncio.Lock()

    @property
    def peer_id(self) -> str:
        return str(self.peer.get("agent_id", "?"))

    async def send(self, frame: Frame) -> int:
        """Write one frame; ``ConnectionError`` if the connection is (or goes) down."""
        if self.closed:
            raise ConnectionError(f"connection to {self.peer_id} is closed")
        async with self._lock:
            try:
                return await write_frame(self.writer, frame)
            except (OSError, RuntimeError) as exc:
                self.close()
                raise ConnectionError(f"send to {self.peer_id}: {exc}") from exc

    def post(self, frame: Frame) -> None:
        """Queue one frame without waiting for the buffer to drain (call ``flush`` after).

        A decode step emits one frame per running request; draining once per step instead of
        once per frame is most of the streaming cost of a large batch.
        """
        if self.closed:
            raise ConnectionError(f"connection to {self.peer_id} is closed")
        try:
            self.writer.write(encode_frame(frame))
        except (OSError, RuntimeError) as exc:
            self.close()
            raise ConnectionError(f"send to {self.peer_id}: {exc}") from exc

    async def flush(self) -> None:
        """Wait until what ``post`` queued has drained; ``ConnectionError`` if it cannot."""
        if self.closed:
            raise ConnectionError(f"connection to {self.peer_id} is closed")
        async with self._lock:
            try:
                await self.writer.drain()
            except (OSError, RuntimeError) as exc:
                self.close()
                raise ConnectionError(f"flush to {self.peer_id}: {exc}") from exc

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.transport.abort()

    def reset(self) -> None:
        """Close with a TCP reset (``reset``): an abandoned transfer stops using the line at
        once."""
        if not self.closed:
            self.closed = True
            reset(self.writer)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s connection with a TCP reset (``SO_LINGER`` 0): the kernel discards
    what it has not sent yet instead of delivering it before a FIN, and the peer reads a reset
    (``ConnectionResetError``), not the end of a stream."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def hello(role: str, agent_id: str, model: str) -> Frame:
    return control(FrameType.HELLO, "", {"role": role, "agent_id": agent_id, "model": model})


def plane_auth(config: DataPlaneConfig) -> PlaneAuth | None:
    """The handshake signer of a process of this plane (None: no secret, no sockets)."""
    return PlaneAuth(config.plane_secret) if config.plane_secret else None


async def serve_frames(
    host: str,
    port: int,
    me: Frame,
    handler: FrameHandler,
    on_close: Callable[[Conn], None] | None = None,
    *,
    auth: PlaneAuth | None,
    tls: ssl.SSLContext | None,
) -> asyncio.Server:
    """Accept agent connections: HELLO in, HELLO_ACK out, then every frame to ``handler``.

    With ``tls`` every connection is TLS first, with a certificate of the plane's CA
    (``agent.tls.serve_tls``: anything else, plain text included, is refused and logged), and
    the certificate must name the agent and role the HELLO claims. The HELLO must prove the
    plane's secret and be meant for this agent (``agent.auth``); one that does not is answered
    ``ERROR{code: unauthenticated}``, logged with the peer's address and closed.

    A ``ProtocolError`` closes that one connection (logged); a handler error for one frame is
    logged and the connection goes on, so one bad request never takes a peer's others down. A
    handler that fails because this very connection went down (the peer left while its frame
    was answered) ends the connection quietly.
    """

    if auth is None:
        raise AuthError("no plane secret: an agent never serves unauthenticated connections")

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn: Conn | None = None
        try:
            first = await asyncio.wait_for(read_frame(reader), HELLO_TIMEOUT_S)
            if first is None or first.type is not FrameType.HELLO:
                raise ProtocolError("first frame must be HELLO")
            if not await _admitted(first, writer, me=me, auth=auth, tls=tls):
                return
            conn = Conn(reader, writer, dict(first.body))
            await conn.send(control(FrameType.HELLO_ACK, "", auth.ack(me.body, first.body)))
            await _feed(conn, handler)
        except (ProtocolError, TimeoutError) as exc:
            log.warning("closing connection: %r", exc)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            # Shutdown cancels open connections. This task is the connection's top level (nothing
            # awaits it), so it ends quietly: Python 3.11's StreamReaderProtocol logs a cancelled
            # handler as an error with a traceback (3.12 no longer does).
            pass
        finally:
            if conn is not None:
                conn.close()
                if on_close is not None:
                    on_close(conn)
            else:
                writer.transport.abort()

    if tls is not None:
        return await serve_tls(accept, host, port, tls, limit=READ_LIMIT, timeout_s=HELLO_TIMEOUT_S)
    return await asyncio.start_server(accept, host, port, limit=READ_LIMIT)


async def _admitted(
    hello: Frame,
    writer: asyncio.StreamWriter,
    *,
    me: Frame,
    auth: PlaneAuth,
    tls: ssl.SSLContext | None,
) -> bool:
    """Whether a HELLO proves the plane's secret, is meant for this agent and (with ``tls``)
    claims the agent and role its certificate names; a refused one is logged with the peer's
    address and answered ``ERROR{code: unauthenticated}``."""
    try:
        auth.check_hello(hello.body, me=me.body)
        if tls is not None:
            check_peer(writer.get_extra_info("peercert"), str(hello.body.get("agent_id")),
                       str(hello.body.get("role")))  # fmt: skip
    except AuthError as exc:
        peer = writer.get_extra_info("peername")
        log.warning(
            "refused HELLO from %s (role %r, agent %r): %s",
            peer, hello.body.get("role"), hello.body.get("agent_id"), exc,
        )  # fmt: skip
        refusal = {"code": "unauthenticated", "message": str(exc)}
        writer.write(encode_frame(control(FrameType.ERROR, "", refusal)))
        with contextlib.suppress(OSError):
            await asyncio.wait_for(writer.drain(), 1.0)
        return False
    return True


async def _feed(conn: Conn, handler: FrameHandler) -> None:
    """Every frame of an accepted connection to ``handler`` until the peer leaves: a
    ``ProtocolError`` ends the connection, a handler's failure on one frame is logged and the
    next frame goes on, and a handler that failed because this very peer left ends it."""
    while True:
        frame = await read_frame(conn.reader)
        if frame is None:
            return
        try:
            await handler(conn, frame)
        except ProtocolError:
            raise
        except ConnectionError as exc:
            if not conn.closed:  # another connection's failure: the handler's to own
                log.exception("handler failed on %s %s", frame.type.name, frame.request_id)
                continue
            # This very peer left while its frame was answered (a gateway that stops
            # mid-PING): the connection is over, not a handler bug.
            log.info("%s left while %s %s was answered: %s",
                     conn.peer_id, frame.type.name, frame.request_id, exc)  # fmt: skip
            return
        except Exception:
            log.exception("handler failed on %s %s", frame.type.name, frame.request_id)


class PeerLink:
    """An outgoing connection to one peer agent, opened on first use and re-opened after loss.

    ``on_frame`` gets every frame the peer sends; ``on_down`` is called once per lost
    connection so the owner can fail the requests that were riding on it.
    """

    def __init__(
        self,
        name: str,
        address: tuple[str, int],
        me: Frame,
        on_frame: Callable[[Frame], Awaitable[None]],
        on_down: Callable[[PeerLink], None],
        *,
        role: str,
        connect_timeout_s: float,
        auth: PlaneAuth | None,
        tls: Callable[[], ssl.SSLContext | None],
    ) -> None:
        """A link to the agent ``name`` of ``role`` (the HELLO is bound to both). ``tls`` gives
        the context to connect with when the link connects (None: plain); over TLS the
        server's certificate must name ``name`` and ``role`` too."""
        self.name = name
        self.role = role
        self._tls = tls
        self._auth = auth
        self.address = address
        self._me = me
        self._on_frame = on_frame
        self._on_down = on_down
        self._timeout = connect_timeout_s
        self._conn: Conn | None = None
        self._connecting = asyncio.Lock()
        self._reader_task: asyncio.Task[None] | None = None

    @property
    def up(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def connection(self) -> Conn:
        """The live connection, connecting (bounded by the timeout) if needed."""
        async with self._connecting:
            if self._conn is not None and not self._conn.closed:
                return self._conn
            if self._auth is None:
                raise ConnectionError(f"{self.name}: no plane secret to authenticate with")
            try:
                context = self._tls()
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
                        *self.address, limit=READ_LIMIT, ssl=context,
                        server_hostname=self.name if context else None,
                        ssl_handshake_timeout=self._timeout if context else None,
                    ),
                    self._timeout,
                )  # fmt: skip
                conn = Conn(reader, writer, {"agent_id": self.name})
                if context is not None:
                    check_peer(writer.get_extra_info("peercert"), self.name, self.role)
                greeting = self._auth.hello(self._me.body, to_role=self.role, to_agent=self.name)
                await asyncio.wait_for(
                    conn.send(control(FrameType.HELLO, "", greeting)), self._timeout
                )
                ack = await asyncio.wait_for(read_frame(reader), self._timeout)
                if ack is None or ack.type is not FrameType.HELLO_ACK:
                    conn.close()
                    raise ConnectionError(f"{self.name}: no HELLO_ACK")
                self._auth.check_ack(ack.body, greeting)
            except AuthError as exc:
                conn.close()
                raise ConnectionError(f"{self.name}: {exc}") from exc
            except (OSError, TimeoutError, ProtocolError) as exc:
                reason = f"cannot reach {self.name} at {self.address}: {exc!r}"
                raise ConnectionError(reason) from exc
            self._conn = conn
            self._reader_task = asyncio.create_task(self._read(conn))
            return conn

    async def send(self, frame: Frame) -> int:
        conn = await self.connection()
        return await conn.send(frame)

    async def _read(self, conn: Conn) -> None:
        try:
            while True:
                frame = await read_frame(conn.reader)
                if frame is None:
                    break
                try:
                    await self._on_frame(frame)
                except Exception:
                    log.exception("%s: frame handler failed", self.name)
        except (ProtocolError, OSError) as exc:
            log.warning("%s: connection lost: %r", self.name, exc)
        finally:
            conn.close()
            self._on_down(self)

    async def close(self, *, reset: bool = False) -> None:
        """Close the connection (with a TCP reset if ``reset``: bytes not yet sent are dropped)."""
        if self._conn is not None and reset:
            self._conn.reset()
        elif self._conn is not None:
            self._conn.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
