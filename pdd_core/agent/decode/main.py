"""The main decode (MD) agent: decode-side radix cache, extend at handoff, continuous batching.

MD answers P's ``KV_QUERY`` with how many leading blocks its DRC holds (pinning them until the
request's KV is assembled; a ``KV_HAVE{update}`` follows when an earlier request's KV lands
meanwhile and extends that prefix), imports the cached blocks followed by the received ones,
and keeps the new full blocks in the DRC for the next turn (DOMAIN.md section 4). For P-MD it
streams from the first token; for P-RLD-MD it tells RLD when the prefill KV is in
(``HANDOFF_ACK {absorbed: 0}``), extends over the token IDs RLD hands over, checks that each
chunk starts with the token its last extend predicted, and streams from the position after the
last handed token.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from pdd_core.agent.base import AgentBase
from pdd_core.agent.decode.decoding import DecodeLoop, Stream
from pdd_core.agent.engines import eos_token, offloads
from pdd_core.agent.kvstore import BlockCache
from pdd_core.agent.protocol import Frame, FrameType, control, parse_kv_block, token_ids
from pdd_core.agent.runtime import Conn
from pdd_core.agent.trace import mark
from pdd_core.engine.protocol import DecodeState, EngineError, KVBlock, PacedEngine

log = logging.getLogger(__name__)


class MainDecodeAgent(AgentBase):
    role = "main"

    def __init__(self, config: Any, agent_id: str) -> None:
        super().__init__(config, agent_id)
        self.drc = BlockCache(config.limits.drc_tokens, self.engine.block_size)
        self.paced = PacedEngine(self.engine, offload=offloads(config))
        self.streams: dict[str, Stream] = {}
        self.query: dict[str, tuple[list[int], int]] = {}  # rid -> (hashes, blocks held)
        self.sources: dict[str, Conn] = {}  # rid -> P's connection while its KV is arriving
        self.pins: dict[str, list[int]] = {}
        self.watchers: dict[str, Conn] = {}
        self.pending: dict[str, int] = {}  # rid -> token the last extend predicted
        self.loop = DecodeLoop(self.paced, config.limits.decode_batch, self._after_token)

    async def start(self) -> None:
        await super().start()
        self.spawn(self.loop.run())

    async def on_gateway(self, conn: Conn) -> None:
        await self.cache_event(list(self.drc.blocks), [], True)

    def _stream(self, rid: str) -> Stream:
        return self.streams.setdefault(rid, Stream(rid, eos=eos_token(self.engine)))

    async def handle(self, conn: Conn, frame: Frame) -> None:
        rid = frame.request_id
        kind = frame.type
        if self.is_released(rid) and kind is not FrameType.CANCEL:
            await self._late(conn, frame)
            return
        if kind is FrameType.GENERATE:
            stream = self._stream(rid)
            # What P's frames set before this registration arrived (they race it) is newer.
            stream.gateway, stream.meta = conn, {**frame.body, **stream.meta}
        elif kind is FrameType.KV_QUERY:
            raw = frame.body.get("block_hashes", [])
            hashes = [h for h in raw if isinstance(h, int)] if isinstance(raw, list) else []
            held = self.drc.match(hashes)
            self.drc.pin(hashes[:held])
            self.query[rid] = (hashes, held)
            self.sources[rid] = conn
            self._stream(rid)
            await conn.send(control(FrameType.KV_HAVE, rid, {"blocks": held}))
            return
        elif kind is FrameType.KV_BLOCK:
            block = parse_kv_block(frame)
            self._stream(rid).blocks.append(
                KVBlock(block.index, block.block_hash, block.tokens, block.data)
            )
            return
        elif kind is FrameType.KV_DONE:
            mark(rid, "md_kv_done")
            stream = self._stream(rid)
            route = {k: frame.body[k] for k in ("pipeline", "rld") if k in frame.body}
            stream.meta.update(route)  # the gateway relayed a P-MD request when P's pass ended
            await self._assemble(stream, dict(frame.body))
            if stream.kv_done is not None:  # P's connection that carried it is free again
                await self._quietly(conn, control(FrameType.KV_LANDED, rid))
        elif kind is FrameType.WATCH:
            self.watchers[rid] = conn
            self._stream(rid)
        elif kind is FrameType.HANDOFF:
            await self._handoff(conn, rid, frame)
            return
        elif kind is FrameType.CANCEL:
            gone = self.streams.get(rid)
            if gone is not None:
                self._drop(gone)
            self.release_id(rid)  # P's KV may still be on its way: it must not revive it
            return
        else:
            return
        current = self.streams.get(rid)
        if current is not None:  # a failed import released it
            await self._maybe_start(current)

    @staticmethod
    async def _quietly(conn: Conn, frame: Frame) -> None:
        with contextlib.suppress(ConnectionError):
            await conn.send(frame)

    async def _late(self, conn: Conn, frame: Frame) -> None:
        """A frame of a request already released here (cancelled, finished, failed).

        P's ``KV_QUERY`` gets ``KV_HAVE{released: true}`` so P sends no KV across the WAN
        for nothing; anything else is dropped.
        """
        if frame.type is FrameType.KV_QUERY:
            body = {"blocks": 0, "released": True}
            await conn.send(control(FrameType.KV_HAVE, frame.request_id, body))

    async def _assemble(self, stream: Stream, done: dict[str, Any]) -> None:
        hashes, held = self.query.pop(stream.request_id, ([], 0))
        # P sent the blocks from ``have`` on: what it knew MD held when its transfer started
        # (MD's answer or a later update; never more than MD pinned for it).
        have = done.get("have", held)
        try:
            if not isinstance(have, int) or not 0 <= have <= held:
                raise EngineError(f"P skipped {have} blocks; this DRC held {held} for it")
            blocks = self.drc.get(hashes[:have]) + stream.blocks
            stream.kv = self.engine.import_blocks(blocks)
        except (EngineError, KeyError) as exc:
            self.drc.unpin(hashes[:held])
            await self._fail(stream, "kv_import", str(exc))
            return
        added, removed = self.drc.store(blocks)
        self.drc.unpin(hashes[:held])
        full = [b.block_hash for b in blocks if len(b.tokens) == self.engine.block_size]
        self.pins[stream.request_id] = full[: self.drc.pin(full)]
        stream.blocks = []
        stream.kv_done = done
        self.sources.pop(stream.request_id, None)
        stream.meta.setdefault("md_have_blocks", have)
        await self.cache_event(added, removed, False)
        if added:
            await self._announce(added)
        # The request's WAN transfer has ended: the gateway stops counting it on the line.
        await self.to_gateway(stream.gateway, control(FrameType.KV_LANDED, stream.request_id))

    async def _announce(self, added: list[int]) -> None:
        """KV just stored here may extend what earlier answers to ``KV_QUERY`` said this DRC
        holds (a session's previous turn landing while P prefills the next): tell P with a
        ``KV_HAVE{update}`` (pinning the longer prefix) while it has not started sending, so
        that its transfer skips what is here when the pass ends, as the simulator's does."""
        fresh = set(added)
        for rid, (hashes, held) in list(self.query.items()):
            stream, source = self.streams.get(rid), self.sources.get(rid)
            if stream is None or source is None or stream.blocks or held >= len(hashes):
                continue  # gone, P is sending already, or it lacks nothing
            if hashes[held] not in fresh:
                continue  # the next block it lacks did not just arrive
            more = self.drc.pin(hashes)
            self.drc.unpin(hashes[:held])
            self.query[rid] = (hashes, more)
            update = {"blocks": more, "update": True}
            await self._quietly(source, control(FrameType.KV_HAVE, rid, update))

    async def _maybe_start(self, stream: Stream) -> None:
        if stream.finished:
            return
        if stream.kv is not None and stream.kv_done is not None and stream.state is None:
            if stream.meta.get("pipeline") == "P-RLD-MD":
                watcher = self.watchers.pop(stream.request_id, None)
                if watcher is not None:
                    # A relay that died meanwhile cannot hand over; the gateway re-routes its
                    # stream, so a closed connection here is not this agent's failure.
                    ack = control(FrameType.HANDOFF_ACK, stream.request_id, {"absorbed": 0})
                    await self._quietly(watcher, ack)
            elif stream.registered:
                first = int(stream.kv_done.get("first_token", 0))
                stream.state = DecodeState(stream.request_id, stream.kv, first)
                stream.pending_first = first
        await self._maybe_begin(stream)

    async def _maybe_begin(self, stream: Stream) -> None:
        """Start streaming once the gateway's registration is in (frames may race it)."""
        if stream.registered and stream.pending_first is not None and not stream.finished:
            token, stream.pending_first = stream.pending_first, None
            mark(stream.request_id, "md_first_token")
            if await stream.emit(token):
                self.loop.add(stream)
            else:
                self._finish(stream)

    async def _handoff(self, conn: Conn, rid: str, frame: Frame) -> None:
        stream = self.streams.get(rid)
        tokens = token_ids(frame.body)
        start = frame.body.get("start", 0)
        start = start if isinstance(start, int) else 0
        if stream is None or stream.kv is None or stream.finished:
            await conn.send(control(FrameType.ERROR, rid, {"code": "unknown_request"}))
            return
        expected = self.pending.get(rid)
        if expected is not None and tokens and tokens[0] != expected:
            await self._fail(
                stream, "handoff_mismatch", f"token {start}: {tokens[0]} != {expected}"
            )
            return
        if tokens:
            result = await self.paced.extend(stream.kv, tokens)
            stream.kv = result.kv
            self.pending[rid] = result.next_token
        if not frame.body.get("final"):
            await conn.send(control(FrameType.HANDOFF_ACK, rid, {"absorbed": start + len(tokens)}))
            return
        next_token = self.pending.pop(rid, None)
        if next_token is None:
            await self._fail(stream, "handoff_empty", "a final handoff needs tokens")
            return
        stream.meta["handed_over"] = start + len(tokens)
        stream.next_index = start + len(tokens)
        if stream.next_index >= stream.max_tokens:
            self._finish(stream)
            return
        stream.state = DecodeState(rid, stream.kv, next_token)
        stream.pending_first = next_token
        await self._maybe_begin(stream)

    async def _after_token(self, stream: Stream, token: int) -> bool:
        if await stream.emit(token, flush=False):
            return True
        self._finish(stream)
        return False

    def _release(self, stream: Stream) -> None:
        self.release_id(stream.request_id)
        source = self.sources.pop(stream.request_id, None)
        if source is not None and stream.kv_done is None and not source.closed:
            # P is still sending this request's KV across the WAN: tell it to stop.
            stop = control(FrameType.CANCEL, stream.request_id, {"reason": "released"})
            self.spawn(self._quietly(source, stop))
        self.streams.pop(stream.request_id, None)
        self.loop.remove(stream)
        self.watchers.pop(stream.request_id, None)
        self.pending.pop(stream.request_id, None)
        hashes, held = self.query.pop(stream.request_id, ([], 0))
        if held:
            self.drc.unpin(hashes[:held])
        pinned = self.pins.pop(stream.request_id, [])
        if pinned:
            self.drc.unpin(pinned)

    def _finish(self, stream: Stream) -> None:
        stream.finished = True
        self._release(stream)
        handed = stream.meta.get("handed_over", 0)
        self.record(
            stream.request_id,
            stream.meta,
            stream.arrival,
            output_tokens=stream.next_index,
            md_tokens=stream.next_index - (handed if isinstance(handed, int) else 0),
        )

    def _drop(self, stream: Stream) -> None:
        stream.finished = True
        self._release(stream)

    async def _fail(self, stream: Stream, code: str, message: str) -> None:
        log.warning("%s: %s: %s", stream.request_id, code, message)
        await self.to_gateway(
            stream.gateway,
            control(FrameType.ERROR, stream.request_id, {"code": code, "message": message}),
        )
        self._drop(stream)

    def connection_lost(self, conn: Conn) -> None:
        for stream in list(self.streams.values()):
            if stream.gateway is conn:
                self._drop(stream)

    def reap(self, older_than_s: float) -> None:
        now = time.monotonic()
        for stream in list(self.streams.values()):
            if stream.state is None and now - stream.touched > older_than_s:
                self._drop(stream)
