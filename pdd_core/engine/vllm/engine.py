"""``VLLMEngine``: the agents' ``Engine`` protocol on a vLLM instance.

vLLM schedules its own batches: there is no per-step call, and KV enters and leaves only
through the KV connector (``connector.PddBlockConnector``) and its ``BlockStore``. This adapter
maps each protocol operation onto per-request calls of vLLM's OpenAI-compatible server, with
token IDs in and out (``prompt`` as a list of ids, ``return_token_ids``):

- ``prefill``: a completion of the prompt with ``max_tokens=1`` (P). The connector saves every
  block of the prompt into the store before the response returns; the KV handle is the token
  list, and ``export_blocks`` reads the blocks back from the store by chain hash.
- ``import_blocks`` (RLD, MD, and P for its own prefix-cache hits): verifies the chain and
  writes the blocks into the store, where the connector finds them as an external cache hit.
- ``decode_step`` (RLD, MD): each sequence has a streaming completion of its context plus its
  pending token, opened on first use (vLLM loads the imported prefix through the connector) and
  reopened after ``decode_chunk`` tokens or if the agent's state moved on without it; a step
  takes the next token of each stream.
- ``extend`` (MD, the token-ID handoff): a completion of the context plus the handed-over
  tokens with ``max_tokens=1``; vLLM reuses the context's KV and computes the handed tokens.

Costs are vLLM's real compute time, so every result reports 0 simulated seconds. Streams not
polled for ``idle_s`` (a cancelled or finished request) are closed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pdd_core.engine.protocol import (
    DecodeState,
    EngineError,
    ExtendResult,
    KVBlock,
    PrefillResult,
    SequenceKV,
    StepResult,
    check_cached_prefix,
    check_chain,
)
from pdd_core.engine.vllm.store import BlockStore


class VLLMKV(SequenceKV):
    """A sequence's KV on a vLLM instance: its tokens; the bytes live in vLLM and the store."""


@dataclass
class _Stream:
    """One streaming completion: its tokens as they arrive, and the context it continues."""

    context: int  # len(kv.tokens) the next decode_step must see
    tokens: queue.Queue[int | None] = field(default_factory=queue.Queue)
    polled: float = field(default_factory=time.monotonic)
    connection: http.client.HTTPConnection | None = None
    delivered: int = 0
    done: bool = False
    closed: bool = False  # ``_close`` was called: the pump stops reading


class VLLMEngine:
    """``engine.protocol.Engine`` over a vLLM server and the block store its connector uses."""

    def __init__(
        self,
        url: str,
        model: str,
        store: BlockStore,
        *,
        block_size: int,
        vocab_size: int = 0,
        timeout_s: float = 60.0,
        decode_chunk: int = 64,
        idle_s: float = 30.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url: an http://host:port address, got {url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.model = model
        self.store = store
        self.block_size = block_size
        self.vocab_size = vocab_size
        self.timeout_s = timeout_s
        self.decode_chunk = decode_chunk
        self.idle_s = idle_s
        self._streams: dict[str, _Stream] = {}

    # --- the Engine protocol -------------------------------------------------------------

    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult:
        check_cached_prefix(tokens, cached)  # the cached blocks are in the store already
        first = self.complete(tokens, 1)[0]
        return PrefillResult(kv=VLLMKV(tokens, self.block_size), first_token=first)

    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        self._close_idle()
        out: list[int] = []
        for state in batch:
            stream = self._streams.get(state.request_id)
            if stream is None or stream.context != len(state.kv.tokens) or stream.done:
                if stream is not None:
                    self._close(state.request_id)
                stream = self._open(state.request_id, [*state.kv.tokens, state.last_token])
            token = self._next(state.request_id, stream)
            state.kv.tokens.append(state.last_token)
            state.last_token = token
            stream.context += 1
            out.append(token)
        return StepResult(tokens=out)

    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        if not tokens:
            raise EngineError("tokens: extend needs at least one token")
        full = [*context.tokens, *tokens]
        return ExtendResult(kv=VLLMKV(full, self.block_size), next_token=self.complete(full, 1)[0])

    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]:
        hashes = kv.block_hashes(partial=True)
        size = self.block_size
        blocks: list[KVBlock] = []
        for index in range(start_block, len(hashes)):
            data = self.store.read(hashes[index])
            if data is None:
                raise EngineError(f"block {index}: not in the store (was it saved by vLLM?)")
            tokens = tuple(kv.tokens[index * size : (index + 1) * size])
            blocks.append(KVBlock(index, hashes[index], tokens, data))
        return blocks

    def import_blocks(self, blocks: Sequence[KVBlock]) -> VLLMKV:
        tokens = check_chain(blocks, self.block_size)
        sizes = {len(b.data) // len(b.tokens) for b in blocks}
        if len(sizes) > 1 or any(len(b.data) % len(b.tokens) for b in blocks):
            raise EngineError("blocks: KV bytes per token differ between blocks")
        for block in blocks:
            if not self.store.has(block.block_hash) or len(block.tokens) < self.block_size:
                self.store.write(block.block_hash, block.data)
        return VLLMKV(tokens, self.block_size)

    # --- vLLM's HTTP API -------------------------------------------------------------------

    def _body(self, tokens: Sequence[int], max_tokens: int, stream: bool) -> bytes:
        # An id outside the vocabulary kills vLLM's engine (an embedding index error in the
        # worker), taking every other request with it: refuse it here.
        if self.vocab_size and any(not 0 <= t < self.vocab_size for t in tokens):
            raise EngineError(f"tokens: ids must be in [0, {self.vocab_size})")
        request: dict[str, Any] = {
            "model": self.model,
            "prompt": list(tokens),
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "return_token_ids": True,
            "stream": stream,
        }
        return json.dumps(request).encode("utf-8")

    def complete(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        """Greedy completion of ``tokens``; the generated token ids."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            connection.request(
                "POST",
                "/v1/completions",
                self._body(tokens, max_tokens, False),
                {"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            payload = response.read()
        except OSError as exc:
            raise EngineError(f"vLLM at {self.host}:{self.port}: {exc}") from exc
        finally:
            connection.close()
        if response.status != 200:
            raise EngineError(f"vLLM answered {response.status}: {payload[:300]!r}")
        ids = json.loads(payload)["choices"][0].get("token_ids") or []
        if not ids:
            raise EngineError("vLLM returned no token ids (is return_token_ids supported?)")
        return [int(t) for t in ids]

    def _open(self, rid: str, tokens: list[int]) -> _Stream:
        stream = _Stream(context=len(tokens) - 1)
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        stream.connection = connection
        body = self._body(tokens, self.decode_chunk, True)
        thread = threading.Thread(
            target=self._pump, args=(connection, body, stream), name=f"vllm-{rid}", daemon=True
        )
        self._streams[rid] = stream
        thread.start()
        return stream

    def _pump(self, connection: http.client.HTTPConnection, body: bytes, stream: _Stream) -> None:
        """Read a server-sent-events completion, queueing each token id; None at the end."""
        try:
            connection.request(
                "POST", "/v1/completions", body, {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            if response.status != 200:
                return
            for raw in response:
                if stream.closed:
                    break
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[5:]).get("choices", []):
                    for token in choice.get("token_ids") or []:
                        stream.tokens.put(int(token))
        except (OSError, ValueError, http.client.HTTPException):
            pass  # the server went away, or ``_close`` shut the socket: the stream ends
        finally:
            stream.tokens.put(None)
            connection.close()

    def _next(self, rid: str, stream: _Stream) -> int:
        stream.polled = time.monotonic()
        try:
            token = stream.tokens.get(timeout=self.timeout_s)
        except queue.Empty:
            token = None
        if token is None:
            stream.done = True
            raise EngineError(f"{rid}: vLLM's stream ended early")
        stream.delivered += 1
        if stream.delivered >= self.decode_chunk:
            stream.done = True  # its max_tokens are spent: the next step reopens it
        return token

    def _close(self, rid: str) -> None:
        stream = self._streams.pop(rid, None)
        if stream is None:
            return
        # The pump's thread owns the connection and closes it; closing it from here would pull
        # the response's file from under a read in progress. Shutting the socket down ends that
        # read, and vLLM aborts a request whose client went away.
        stream.closed = True
        sock = stream.connection.sock if stream.connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed by the pump
                sock.shutdown(socket.SHUT_RDWR)

    def _close_idle(self) -> None:
        now = time.monotonic()
        for rid, stream in list(self._streams.items()):
            if now - stream.polled > self.idle_s:
                self._close(rid)


def engine_for(section: Any, role: str, agent_id: str, block_size: int) -> VLLMEngine:
    """The adapter to ``agent_id``'s instance as the topology's ``engine.vllm`` describes it."""
    from pdd_core.engine.vllm.config import instance_for

    spec = instance_for(section, role, agent_id, block_size)
    return VLLMEngine(
        spec.url,
        spec.name,
        BlockStore(spec.store_dir, spec.store_capacity_bytes),
        block_size=spec.block_size,
        vocab_size=spec.vocab_size,
        timeout_s=spec.timeout_s,
        decode_chunk=spec.decode_chunk,
    )
