"""The prefill (P) agent's KV transfer: both ways at once, once a prefill has ended.

Every block goes to the relay beside P (RDMA in the real system), and over the WAN to MD only
the blocks MD's DRC lacks: P asks MD with a ``KV_QUERY`` while it computes and takes MD's
later ``KV_HAVE`` updates. Each transfer to MD takes a connection (a lane) of its own until MD
reports its KV landed, so concurrent transfers share the line as the simulator counts them; a
transfer MD no longer needs is reset at once. ``PrefillAgent`` (``prefill``) derives from
``KVTransfer`` and adds the prefill itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pdd_core.agent.base import AgentBase
from pdd_core.agent.protocol import Frame, FrameType, KVBlockPayload, control, kv_block_frame
from pdd_core.agent.runtime import Conn, PeerLink
from pdd_core.agent.trace import mark
from pdd_core.engine.protocol import KVBlock

log = logging.getLogger("pdd_core.agent.prefill")


@dataclass(slots=True)
class PrefillJob:
    conn: Conn
    request_id: str
    prompt: list[int]
    meta: dict[str, Any]
    arrival: float = field(default_factory=time.time)
    query: asyncio.Future[tuple[int, int]] | None = None  # KV_QUERY to MD: (bytes, blocks held)
    # A P-MD request's route after the gateway's check at the end of its prefill (its meta,
    # updated to P-RLD-MD and the relay when the gateway relays it).
    rechecked: asyncio.Task[dict[str, Any]] | None = None


class KVTransfer(AgentBase):
    """P's side of the KV's way to RLD and MD: MD's answers, the lanes, and the shipping."""

    def __init__(self, config: Any, agent_id: str) -> None:
        super().__init__(config, agent_id)
        self._have: dict[tuple[str, str], asyncio.Future[int]] = {}
        # (MD, rid) -> the most blocks MD's later KV_HAVEs said it holds (KV that landed there
        # after it answered the query), read when the transfer starts.
        self._newer: dict[tuple[str, str], int] = {}
        self._lanes: dict[str, set[str]] = {}  # MD -> its connections carrying a transfer now
        # (MD, rid) -> (lane, when it started): a transfer until MD says its KV landed.
        self._carrying: dict[tuple[str, str], tuple[str, float]] = {}
        # (MD, rid) -> when MD said it released the request while its KV was still crossing.
        self.abandoned: dict[tuple[str, str], float] = {}

    async def on_peer_frame(self, agent_id: str, frame: Frame) -> None:
        if frame.type is FrameType.KV_LANDED:
            self._landed(agent_id, frame.request_id)
            return
        if frame.type is FrameType.CANCEL:
            self.abandoned[(agent_id, frame.request_id)] = time.monotonic()
            await self._abort_transfer(agent_id, frame.request_id)
            return
        if frame.type is FrameType.KV_HAVE:
            key, blocks = (agent_id, frame.request_id), frame.body.get("blocks", 0)
            if frame.body.get("update"):
                if key in self._newer and isinstance(blocks, int):
                    self._newer[key] = max(self._newer[key], blocks)
                return
            waiter = self._have.pop(key, None)
            if frame.body.get("released"):
                blocks = -1  # MD is done with the request (the relay finished it)
            if waiter is not None and not waiter.done():
                waiter.set_result(int(blocks) if isinstance(blocks, int) else 0)

    def reap(self, older_than_s: float) -> None:
        """Forget releases that arrived after their transfer had ended, and free the lanes
        of transfers MD never answered for (their connection is closed)."""
        horizon = time.monotonic() - older_than_s
        for key, when in list(self.abandoned.items()):
            if when < horizon:
                del self.abandoned[key]
        for (md, rid), (_, started) in list(self._carrying.items()):
            if started < horizon:
                self.spawn(self._abort_transfer(md, rid))

    def _landed(self, md: str, rid: str) -> None:
        """MD holds the request's KV: its lane may carry the next transfer."""
        carried = self._carrying.pop((md, rid), None)
        if carried is not None:
            self._lanes[md].discard(carried[0])

    async def _abort_transfer(self, md: str, rid: str) -> None:
        """MD released the request while its KV was crossing: reset the lane carrying it, so
        the rest of it leaves the line at once (the simulator cancels the flow) instead of
        crossing for nothing beside the next transfers; the lane reconnects when next used. A
        reset, not a close: the bytes already written (the socket buffers hold a whole scaled
        transfer) would still cross before a FIN."""
        carried = self._carrying.get((md, rid))
        if carried is None:
            return
        await self.peer(md, carried[0]).close(reset=True)
        self._landed(md, rid)

    def peer_down(self, link: PeerLink) -> None:
        for (md, rid), (lane, _) in list(self._carrying.items()):
            if md == link.name and self.peers.get(f"{md}#{lane}" if lane else md) is link:
                self._landed(md, rid)  # that lane's connection is gone, and its transfer
        if self.peers.get(f"{link.name}#control") is not link:
            return  # only the control lane carries KV_QUERY answers
        for (agent_id, rid), waiter in list(self._have.items()):
            if agent_id == link.name and not waiter.done():
                waiter.set_exception(ConnectionError(f"{agent_id} went down"))
                self._have.pop((agent_id, rid), None)

    async def _ship(
        self, job: PrefillJob, blocks: list[KVBlock], hit_tokens: int, first_token: int
    ) -> None:
        rid, meta = job.request_id, job.meta
        relay_leg, md_leg = await asyncio.gather(
            self._to_relay(job, blocks, first_token),
            # Bounded: a blackholed line must not hold this request (and its record) forever.
            asyncio.wait_for(
                self._to_main(job, blocks, first_token), self.config.limits.request_timeout_s
            ),
            return_exceptions=True,
        )
        error = next((r for r in (relay_leg, md_leg) if isinstance(r, BaseException)), None)
        wan_bytes, kv_bytes, md_have = (0, 0, 0) if isinstance(md_leg, BaseException) else md_leg
        if error is not None and relay_leg is True:
            # Only MD's leg failed: RLD has the KV and finishes the request itself.
            log.warning("%s: KV to MD failed (%r); the relay keeps it", rid, error)
        elif error is not None:
            log.warning("%s: KV transfer failed: %r", rid, error)
            await self.to_gateway(
                job.conn,
                control(FrameType.ERROR, rid, {"code": "kv_transfer", "message": repr(error)}),
            )
            return
        mark(rid, "p_kv_written")
        body = {
            "hit_tokens": hit_tokens,
            "miss_tokens": len(job.prompt) - hit_tokens,
            "wan_bytes": wan_bytes,
            "wan_kv_bytes": kv_bytes,  # of which KV payload (scaled by payload_scale)
            "md_have_blocks": md_have,
            "blocks": len(blocks),
            "first_token": first_token,
        }
        await self.to_gateway(job.conn, control(FrameType.KV_DONE, rid, body))
        self.record(
            rid,
            meta,
            job.arrival,
            hit_tokens=hit_tokens,
            miss_tokens=len(job.prompt) - hit_tokens,
            wan_bytes=wan_bytes,
        )

    async def _to_relay(self, job: PrefillJob, blocks: list[KVBlock], first: int) -> bool:
        """Every block to the request's relay (the one GENERATE named, or the one the
        gateway's check at the end of the prefill chose); False when it has none."""
        meta = await job.rechecked if job.rechecked is not None else job.meta
        relay = meta.get("rld")
        if not isinstance(relay, str):
            return False
        await self._send_all(self.peer(relay), job.request_id, blocks, first, len(job.prompt))
        return True

    async def _to_main(
        self, job: PrefillJob, blocks: list[KVBlock], first: int
    ) -> tuple[int, int, int]:
        """The blocks MD's DRC lacks, across the WAN; (bytes, of which KV payload, blocks MD
        held), zeros without MD. It starts at once: a P-MD request the gateway relays still
        ships to MD the same way, and only its KV_DONE (which tells MD the route) waits for
        the gateway's check."""
        md = job.meta.get("md")
        if not isinstance(md, str):
            return 0, 0, 0
        return await self._send_missing(md, job, blocks, first)

    async def _send_all(
        self,
        link: PeerLink,
        rid: str,
        blocks: list[KVBlock],
        first: int,
        tokens: int,
        *,
        start: int = 0,
        rechecked: asyncio.Task[dict[str, Any]] | None = None,
    ) -> tuple[int, int]:
        """Blocks from ``start`` on, then KV_DONE; returns (bytes sent, of which KV payload):
        frames and token ids travel at their size, the KV at ``payload_scale`` of its own."""
        sent = kv = 0
        for block in blocks[start:]:
            if self.abandoned.pop((link.name, rid), None) is not None:
                return sent, kv  # MD released it: stop using the line
            payload = KVBlockPayload(block.block_hash, block.index, block.tokens, block.data)
            sent += await link.send(kv_block_frame(rid, payload))
            kv += len(block.data)
        self.abandoned.pop((link.name, rid), None)
        done: dict[str, Any] = {
            "blocks": len(blocks),
            "have": start,
            "tokens": tokens,
            "first_token": first,
        }
        if rechecked is not None:  # MD learns the route it decodes on with its KV
            meta = await rechecked
            done.update(pipeline=meta.get("pipeline"), rld=meta.get("rld"))
        sent += await link.send(control(FrameType.KV_DONE, rid, done))
        return sent, kv

    def _ask_md(self, job: PrefillJob, blocks: list[KVBlock]) -> None:
        """Send MD the ``KV_QUERY`` for a request's full blocks now (MD pins what it holds),
        so the round trip overlaps the prefill instead of following it. KV of earlier requests
        that lands at MD meanwhile is announced by further ``KV_HAVE{update}`` frames: the
        transfer, when the pass ends, skips all that MD held a one-way delay before (the
        simulator reads MD's DRC when the prefill ends)."""
        md = job.meta.get("md")
        if not isinstance(md, str):
            return
        full = [b.block_hash for b in blocks if len(b.tokens) == self.engine.block_size]
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._have[(md, job.request_id)] = waiter
        self._newer[(md, job.request_id)] = 0
        query = control(FrameType.KV_QUERY, job.request_id, {"block_hashes": full})
        job.query = asyncio.ensure_future(self._query(md, query, waiter))
        # Retrieved here too: a plane stopping mid-query must not log "never retrieved".
        job.query.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def _query(self, md: str, query: Frame, waiter: asyncio.Future[int]) -> tuple[int, int]:
        try:
            sent = await self.peer(md, lane="control").send(query)
        except ConnectionError:
            self._have.pop((md, query.request_id), None)
            raise
        have = await waiter
        mark(query.request_id, "p_kv_have")
        return sent, have

    async def _send_missing(
        self, md: str, job: PrefillJob, blocks: list[KVBlock], first: int
    ) -> tuple[int, int, int]:
        """Take MD's answer to the query sent at prefill time (and its updates since), then
        send only the blocks its DRC lacks; returns (bytes, of which KV payload, blocks held)."""
        rid = job.request_id
        full = sum(1 for b in blocks if len(b.tokens) == self.engine.block_size)
        if job.query is None:
            self._ask_md(job, blocks)
        assert job.query is not None
        try:
            sent, have = await asyncio.wait_for(
                asyncio.shield(job.query), self.config.limits.idle_timeout_s
            )
        finally:
            self._have.pop((md, rid), None)
            newer = self._newer.pop((md, rid), 0)
            if not job.query.done():
                job.query.cancel()
        if have < 0:
            return sent, 0, 0  # MD released it already: no KV crosses the WAN for nothing
        have = min(max(have, newer), full)
        lane = self._take_lane(md)
        self._carrying[(md, rid)] = (lane, time.monotonic())
        try:
            shipped, kv = await self._send_all(
                self.peer(md, lane), rid, blocks, first, len(job.prompt), start=have,
                rechecked=job.rechecked,
            )  # fmt: skip
        except BaseException:
            self._landed(md, rid)
            raise
        return sent + shipped, kv, have

    def _take_lane(self, md: str) -> str:
        """A connection to ``md`` that carries no other transfer now ("" is the first): one
        whose last transfer MD reported landed (``KV_LANDED``) or that was closed.

        On the WAN each connection is one flow with its fair share of the line (the emulator
        shares it as ``fairshare.FairShareLink`` does), so each request's KV goes on a
        connection of its own: concurrent transfers share the line, as the simulator and
        ``predict`` count them, instead of queuing one behind another's megabytes on a single
        connection (where a request the relay already finished still delays the next).
        Connections are opened once, as needed, and kept for the next transfers."""
        busy = self._lanes.setdefault(md, set())
        index = 0
        while (lane := f"kv{index}" if index else "") in busy:
            index += 1
        busy.add(lane)
        return lane
