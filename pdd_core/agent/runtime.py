"""What every agent process shares: its engine, the connections it serves and the ones it opens.

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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pdd_core import perf
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
from pdd_core.engine.protocol import (
    DecodeState,
    Engine,
    ExtendResult,
    KVBlock,
    PrefillResult,
    SequenceKV,
    StepResult,
)
from pdd_core.engine.tokenizer import EOS
from pdd_core.specs import load_chips, load_models

log = logging.getLogger(__name__)

FrameHandler = Callable[["Conn", Frame], Awaitable[None]]
HELLO_TIMEOUT_S = 5.0


def make_engine(config: DataPlaneConfig, role: str, agent_id: str = "") -> Engine:
    """The engine of ``role`` as the configuration says (same weights/seed in every process).

    For ``vllm`` it is the adapter to ``agent_id``'s own vLLM instance.
    """
    spec = config.engine
    if spec.kind == "vllm":
        from pdd_core.engine.vllm.engine import engine_for

        return engine_for(spec.vllm, role, agent_id, spec.block_size)
    if spec.kind == "tiny":
        from pdd_core.engine.tiny import TinyConfig, TinyTransformer

        tiny = TinyTransformer(TinyConfig(block_size=spec.block_size))
        if spec.decode_step_s > 0 or spec.prefill_s > 0:
            return _StepFloor(tiny, spec.decode_step_s, spec.prefill_s)
        return tiny
    if spec.kind == "llamacpp":
        from pdd_core.engine.llamacpp import engine_from_spec

        real = engine_from_spec(spec.llamacpp, spec.block_size)
        if spec.decode_step_s > 0 or spec.prefill_s > 0:
            return _StepFloor(real, spec.decode_step_s, spec.prefill_s)
        return real
    from pdd_core.engine.timed import TimedEngine

    model = load_models()[spec.model]
    chip = load_chips()[spec.chips.get(role, next(iter(spec.chips.values()), "h800"))]
    return TimedEngine(
        model,
        chip,
        tp=spec.shape,
        time_scale=spec.time_scale,
        payload_scale=spec.payload_scale,
        block_size=spec.block_size,
    )


def offloads(config: DataPlaneConfig) -> bool:
    """Whether agents run engine calls in a worker thread (llama.cpp: long real calls)."""
    return config.engine.kind == "llamacpp"


def eos_token(engine: Engine) -> int:
    """The id that ends a stream: the model's own (llama.cpp), else ``ByteTokenizer``'s."""
    return int(getattr(engine, "eos_token", EOS))


class _StepFloor:
    """An engine whose decode steps (prefills) last at least ``step_s`` (``prefill_s``).

    The tiny model decodes in microseconds, faster than any WAN round trip, so without a
    floor a relayed request would finish on RLD before MD could take over.
    """

    def __init__(self, engine: Engine, step_s: float, prefill_s: float = 0.0) -> None:
        self.engine = engine
        self.step_s = step_s
        self.prefill_s = prefill_s
        self.block_size = engine.block_size
        self.vocab_size = engine.vocab_size
        self.eos_token = eos_token(engine)

    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult:
        result = self.engine.prefill(tokens, cached)
        return PrefillResult(result.kv, result.first_token, max(result.seconds, self.prefill_s))

    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        result = self.engine.decode_step(batch)
        return StepResult(result.tokens, max(result.seconds, self.step_s))

    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        return self.engine.extend(context, tokens)

    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]:
        return self.engine.export_blocks(kv, start_block)

    def import_blocks(self, blocks: Sequence[KVBlock]) -> SequenceKV:
        return self.engine.import_blocks(blocks)


class Predictor:
    """Predicted prefill and decode-step seconds, from the physics the engines follow.

    The router never derives physics itself (``pdd_core.routing``); the gateway feeds it these.
    TimedEngine's passes are ``pdd_core.perf`` times scaled by ``time_scale``; the tiny model
    has a configured cost per miss token and its decode-step floor. WAN time is
    ``pdd_core.predict``'s (the gateway gives it ``kv_bytes_per_token`` and the line).
    """

    def __init__(self, config: DataPlaneConfig) -> None:
        spec = config.engine
        self._config = config
        if spec.kind == "timed":
            self._model = load_models()[spec.model]
            chips = load_chips()
            self._chips = {
                role: chips[spec.chips.get(role, "h800")] for role in ("prefill", "relay", "main")
            }
            self.kv_bytes_per_token = perf.kv_bytes(self._model, 1) * spec.payload_scale
        elif spec.kind == "llamacpp":
            from pdd_core.engine.llamacpp_config import kv_bytes_per_token, settings_from_mapping

            self.kv_bytes_per_token = kv_bytes_per_token(settings_from_mapping(spec.llamacpp))
        else:
            from pdd_core.engine.tiny import TinyConfig

            self.kv_bytes_per_token = float(TinyConfig().kv_bytes_per_token)

    def prefill_s(self, miss_tokens: int, cached_tokens: int) -> float:
        spec = self._config.engine
        if spec.kind == "timed":
            timing = perf.prefill_time(
                self._model, self._chips["prefill"], max(1, miss_tokens), cached_tokens, spec.shape
            )
            return timing.seconds * spec.time_scale
        return self._config.prefill_s_per_token * miss_tokens

    def decode_step_s(self, role: str, batch: int, context: int = 4096) -> float:
        """One decode step of ``batch`` sequences of ``context`` tokens on ``role``'s chip."""
        spec = self._config.engine
        if spec.kind == "timed":
            timing = perf.decode_step_time(
                self._model, self._chips[role], [context] * max(1, batch), spec.shape
            )
            return timing.seconds * spec.time_scale
        return spec.decode_step_s

    def kv_bytes(self, tokens: int) -> float:
        """Wire bytes of ``tokens`` tokens of KV (payload scale applied)."""
        return max(0, tokens) * self.kv_bytes_per_token


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
) -> asyncio.Server:
    """Accept agent connections: HELLO in, HELLO_ACK out, then every frame to ``handler``.

    The HELLO must prove the plane's secret (``agent.auth``); one that does not is answered
    ``ERROR{code: unauthenticated}``, logged with the peer's address and closed.

    A ``ProtocolError`` closes that one connection (logged); a handler error for one frame is
    logged and the connection goes on, so one bad request never takes a peer's others down.
    """

    if auth is None:
        raise AuthError("no plane secret: an agent never serves unauthenticated connections")

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn: Conn | None = None
        try:
            first = await asyncio.wait_for(read_frame(reader), HELLO_TIMEOUT_S)
            if first is None or first.type is not FrameType.HELLO:
                raise ProtocolError("first frame must be HELLO")
            try:
                auth.check_hello(first.body)
            except AuthError as exc:
                peer = writer.get_extra_info("peername")
                log.warning(
                    "refused HELLO from %s (role %r, agent %r): %s",
                    peer, first.body.get("role"), first.body.get("agent_id"), exc,
                )  # fmt: skip
                refusal = {"code": "unauthenticated", "message": str(exc)}
                writer.write(encode_frame(control(FrameType.ERROR, "", refusal)))
                with contextlib.suppress(OSError):
                    await asyncio.wait_for(writer.drain(), 1.0)
                return
            conn = Conn(reader, writer, dict(first.body))
            await conn.send(control(FrameType.HELLO_ACK, "", auth.ack(me.body, first.body)))
            while True:
                frame = await read_frame(reader)
                if frame is None:
                    break
                try:
                    await handler(conn, frame)
                except ProtocolError:
                    raise
                except Exception:
                    log.exception("handler failed on %s %s", frame.type.name, frame.request_id)
        except (ProtocolError, TimeoutError) as exc:
            log.warning("closing connection: %s", exc)
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

    return await asyncio.start_server(accept, host, port, limit=1 << 22)


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
        connect_timeout_s: float,
        auth: PlaneAuth | None,
    ) -> None:
        self.name = name
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
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(*self.address, limit=1 << 22), self._timeout
                )
                conn = Conn(reader, writer, {"agent_id": self.name})
                greeting = self._auth.hello(self._me.body)
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
                raise ConnectionError(f"cannot reach {self.name} at {self.address}: {exc}") from exc
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
            log.warning("%s: connection lost: %s", self.name, exc)
        finally:
            conn.close()
            self._on_down(self)

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
