"""The relay decode (RLD) agent: decode at once beside P, then hand off to MD by token IDs.

RLD receives the prompt's KV over the fast in-site path and starts emitting tokens while MD's
copy is still crossing the WAN (DOMAIN.md section 4, "eager output tokens"). For P-RLD-MD it
asks MD (``WATCH``) to say when MD holds the prefill KV; MD answers ``HANDOFF_ACK{absorbed: 0}``.
RLD then hands over the token IDs it has emitted: all at once and stops (one-shot), or chunk
by chunk while it keeps decoding until MD has caught up (extend-decode), the mode chosen by
``routing.choose_handoff_mode`` from RLD's load (or forced by the request). Singular (P-RLD)
requests it finishes itself. Tokens RLD computes after its final handoff are dropped: MD owns
those positions, so the client never sees a token twice or misses one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from pdd_core.agent.base import AgentBase
from pdd_core.agent.decode.decoding import DecodeLoop, Stream
from pdd_core.agent.engines import eos_token, offloads
from pdd_core.agent.protocol import Frame, FrameType, control, parse_kv_block
from pdd_core.agent.runtime import Conn, PeerLink
from pdd_core.agent.trace import mark
from pdd_core.engine.protocol import DecodeState, EngineError, KVBlock, PacedEngine
from pdd_core.routing import HandoffMode, choose_handoff_mode

log = logging.getLogger(__name__)
MAX_HANDOFF_ROUNDS = 8  # extend-decode falls back to a final handoff after this many chunks


class RelayAgent(AgentBase):
    role = "relay"

    def __init__(self, config: Any, agent_id: str) -> None:
        super().__init__(config, agent_id)
        self.streams: dict[str, Stream] = {}
        self.handoff: dict[str, dict[str, Any]] = {}
        self.loop = DecodeLoop(
            PacedEngine(self.engine, offload=offloads(config)),
            config.limits.relay_batch,
            self._after_token,
        )

    async def start(self) -> None:
        await super().start()
        self.spawn(self.loop.run())

    def _stream(self, rid: str) -> Stream:
        return self.streams.setdefault(rid, Stream(rid, eos=eos_token(self.engine)))

    async def handle(self, conn: Conn, frame: Frame) -> None:
        rid = frame.request_id
        if self.is_released(rid):
            return  # late frames of a request finished or cancelled here
        if frame.type is FrameType.GENERATE:
            stream = self._stream(rid)
            stream.gateway, stream.meta = conn, dict(frame.body)
        elif frame.type is FrameType.KV_BLOCK:
            block = parse_kv_block(frame)
            self._stream(rid).blocks.append(
                KVBlock(block.index, block.block_hash, block.tokens, block.data)
            )
        elif frame.type is FrameType.KV_DONE:
            mark(rid, "rld_kv_done")
            self._stream(rid).kv_done = dict(frame.body)
        elif frame.type is FrameType.CANCEL:
            gone = self.streams.pop(rid, None)
            self.release_id(rid)
            if gone is not None:
                stream = gone
                stream.finished = True
                self.loop.remove(stream)
                await self._cancel_md(stream)
            return
        else:
            return
        await self._maybe_start(self.streams[rid])

    async def _maybe_start(self, stream: Stream) -> None:
        if stream.state is not None or not stream.registered or stream.kv_done is None:
            return
        try:
            kv = self.engine.import_blocks(stream.blocks)
        except EngineError as exc:
            await self._fail(stream, "kv_import", str(exc))
            return
        stream.blocks = []
        first = int(stream.kv_done.get("first_token", 0))
        stream.state = DecodeState(stream.request_id, kv, first)
        mark(stream.request_id, "rld_first_token")
        if not await stream.emit(first):
            await self._finish(stream)
            return
        self.loop.add(stream)
        md = stream.meta.get("md")
        if stream.meta.get("pipeline") == "P-RLD-MD" and isinstance(md, str):
            # In a task: a slow connect to MD must not hold up P's frames for other requests.
            self.spawn(self._watch(stream, md))

    async def _watch(self, stream: Stream, md: str) -> None:
        try:
            await self.peer(md).send(control(FrameType.WATCH, stream.request_id))
        except ConnectionError as exc:
            log.warning("%s: cannot watch %s: %r (finishing on RLD)", stream.request_id, md, exc)

    async def _after_token(self, stream: Stream, token: int) -> bool:
        if stream.request_id in self.handoff and self.handoff[stream.request_id].get("final"):
            return False  # MD owns this position now
        if await stream.emit(token, flush=False):
            return True
        await self._finish(stream)
        return False

    async def _finish(self, stream: Stream) -> None:
        stream.finished = True
        self.release_id(stream.request_id)
        self.streams.pop(stream.request_id, None)
        self.loop.remove(stream)
        if stream.request_id not in self.handoff:
            await self._cancel_md(stream)
        info = self.handoff.pop(stream.request_id, {})
        self.record(
            stream.request_id,
            stream.meta,
            stream.arrival,
            output_tokens=len(stream.emitted),
            rld_tokens=len(stream.emitted),
            handoff_mode=str(info.get("mode", "")),
        )

    async def _cancel_md(self, stream: Stream) -> None:
        md = stream.meta.get("md")
        if stream.meta.get("pipeline") == "P-RLD-MD" and isinstance(md, str):
            link = self.peers.get(md)
            if link is not None and link.up:
                cancel = control(FrameType.CANCEL, stream.request_id, {"reason": "done"})
                with contextlib.suppress(ConnectionError):
                    await link.send(cancel)

    async def _fail(self, stream: Stream, code: str, message: str) -> None:
        stream.finished = True
        await self.to_gateway(
            stream.gateway,
            control(FrameType.ERROR, stream.request_id, {"code": code, "message": message}),
        )
        await self._finish(stream)

    async def on_peer_frame(self, agent_id: str, frame: Frame) -> None:
        if frame.type is FrameType.ERROR:
            stream = self.streams.get(frame.request_id)
            if stream is not None:
                log.warning("%s: MD error %s; RLD finishes it", frame.request_id, dict(frame.body))
            return
        if frame.type is not FrameType.HANDOFF_ACK:
            return
        stream = self.streams.get(frame.request_id)
        if stream is None or stream.finished:
            return
        absorbed = frame.body.get("absorbed", 0)
        absorbed = absorbed if isinstance(absorbed, int) else 0
        info = self.handoff.setdefault(stream.request_id, {"rounds": 0})
        if "mode" not in info:
            forced = stream.meta.get("handoff_mode")
            table = self.config.routing
            if forced in (HandoffMode.ONE_SHOT.value, HandoffMode.EXTEND_DECODE.value):
                info["mode"] = str(forced)
            else:
                info["mode"] = choose_handoff_mode(len(stream.emitted), self.loop.load, table).value
        chunk = max(1, self.config.routing.handoff_chunk_tokens)
        remaining = stream.emitted[absorbed:]
        info["rounds"] += 1
        final = (
            info["mode"] == HandoffMode.ONE_SHOT.value
            or len(remaining) <= chunk
            or info["rounds"] >= MAX_HANDOFF_ROUNDS
        )
        tokens = remaining if final else remaining[:chunk]
        if final:
            info["final"] = True  # from here on RLD emits nothing more
            self.loop.remove(stream)
        body = {"tokens": tokens, "start": absorbed, "final": final}
        try:
            await self.peer(agent_id).send(control(FrameType.HANDOFF, stream.request_id, body))
        except ConnectionError as exc:
            if final:  # MD is gone: RLD keeps the request
                info.pop("final", None)
                self.handoff.pop(stream.request_id, None)
                self.loop.add(stream)
            log.warning("%s: handoff failed: %r", stream.request_id, exc)
            return
        if final:
            info["handed_over"] = len(stream.emitted)
            note = {"tokens": [], "index": len(stream.emitted), "handoff_mode": info["mode"]}
            await self.to_gateway(
                stream.gateway, control(FrameType.TOKENS, stream.request_id, note)
            )
            await self._finish(stream)

    def peer_down(self, link: PeerLink) -> None:
        for stream in self.streams.values():
            if stream.meta.get("md") == link.name and stream.request_id not in self.handoff:
                stream.meta["pipeline"] = "P-RLD"  # MD is gone: finish here

    def connection_lost(self, conn: Conn) -> None:
        for stream in list(self.streams.values()):
            if stream.gateway is conn:
                stream.finished = True
                self.loop.remove(stream)
                self.streams.pop(stream.request_id, None)
                self.release_id(stream.request_id)

    def reap(self, older_than_s: float) -> None:
        now = time.monotonic()
        for stream in list(self.streams.values()):
            if stream.state is None and now - stream.touched > older_than_s:
                self.streams.pop(stream.request_id, None)
                self.release_id(stream.request_id)
