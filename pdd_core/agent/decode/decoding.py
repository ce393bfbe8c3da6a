"""What RLD and MD share: a decoding request's state and the continuous-batching loop.

A ``Stream`` is one request on a decode agent: who to send its tokens to, its KV as it
arrives, and, once decoding, a ``DecodeState`` plus the output index of its next token.
``DecodeLoop`` runs ``decode_step`` over every running stream (up to the batch limit) and
lets requests join or leave between steps: continuous batching.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pdd_core.agent.protocol import FLAG_END_OF_STREAM, FrameType, control
from pdd_core.agent.runtime import Conn
from pdd_core.engine.protocol import DecodeState, KVBlock, PacedEngine, SequenceKV
from pdd_core.engine.tokenizer import EOS


@dataclass(slots=True)
class Stream:
    """One request on a decode agent, built from frames that may arrive in any order."""

    request_id: str
    gateway: Conn | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    blocks: list[KVBlock] = field(default_factory=list)
    kv_done: dict[str, Any] | None = None
    kv: SequenceKV | None = None
    state: DecodeState | None = None
    next_index: int = 0
    pending_first: int | None = None  # decoding is ready to begin with this token
    emitted: list[int] = field(default_factory=list)
    finished: bool = False
    arrival: float = field(default_factory=time.time)
    touched: float = field(default_factory=time.monotonic)
    eos: int = EOS  # the model's end-of-sequence id (``runtime.eos_token``)

    @property
    def max_tokens(self) -> int:
        value = self.meta.get("max_tokens", 16)
        return int(value) if isinstance(value, int) else 16

    @property
    def registered(self) -> bool:
        return self.gateway is not None

    async def emit(self, token: int, *, flush: bool = True) -> bool:
        """Send token ``next_index`` to the gateway; returns True if the stream goes on.

        Without ``flush`` the frame is only queued: the decode loop drains each gateway
        connection once per step.
        """
        index = self.next_index
        self.next_index += 1
        self.emitted.append(token)
        self.touched = time.monotonic()
        last = token == self.eos or self.next_index >= self.max_tokens
        frame = control(
            FrameType.TOKENS,
            self.request_id,
            {"tokens": [token], "index": index},
            flags=FLAG_END_OF_STREAM if last else 0,
        )
        sent = False
        if self.gateway is not None and not self.gateway.closed:
            try:
                if flush:
                    await self.gateway.send(frame)
                else:
                    self.gateway.post(frame)
                sent = True
            except ConnectionError:
                sent = False
        if last or not sent:
            self.finished = True
        return not self.finished


class DecodeLoop:
    """Continuous batching: one ``decode_step`` over the running streams, again and again.

    ``after_token`` is called with each stream and its new token; it emits it (or, for a
    stream handed off meanwhile, drops it) and returns whether the stream keeps running.
    """

    def __init__(
        self,
        engine: PacedEngine,
        batch_limit: int,
        after_token: Callable[[Stream, int], Awaitable[bool]],
    ) -> None:
        self.engine = engine
        self.batch_limit = batch_limit
        self.after_token = after_token
        self.running: list[Stream] = []
        self._wake = asyncio.Event()
        self.steps = 0

    @property
    def load(self) -> float:
        """Occupancy in [0, 1]: running streams over the batch limit."""
        return min(1.0, len(self.running) / self.batch_limit)

    def add(self, stream: Stream) -> None:
        self.running.append(stream)
        self._wake.set()

    def remove(self, stream: Stream) -> None:
        if stream in self.running:
            self.running.remove(stream)

    async def run(self) -> None:
        while True:
            if not self.running:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = [s for s in self.running[: self.batch_limit] if s.state is not None]
            states = [s.state for s in batch if s.state is not None]
            result = await self.engine.decode_step(states)
            self.steps += 1
            for stream, token in zip(batch, result.tokens, strict=True):
                if stream.finished or stream not in self.running:
                    continue
                if not await self.after_token(stream, token):
                    self.remove(stream)
            for conn in {s.gateway for s in batch if s.gateway is not None}:
                with contextlib.suppress(ConnectionError):
                    await conn.flush()  # a dead one ends its streams at their next emit
