"""The prefill (P) agent: batched prefill over a prefix cache, then dual-path KV transfer.

A GENERATE from the gateway names the pipeline and the RLD and MD instances. P prefills the
part of the prompt its prefix cache lacks (requests waiting together form one batch), then
ships the KV both ways at once (DOMAIN.md section 4; ``prefill.transfer``): every block to the
relay beside it, and over the WAN to MD only the blocks MD's DRC lacks (asked with
``KV_QUERY``). It reports hit, miss and WAN bytes to the gateway in a ``KV_DONE`` and journals
its part of the request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pdd_core.agent.engines import offloads
from pdd_core.agent.kvstore import BlockCache
from pdd_core.agent.prefill.transfer import KVTransfer, PrefillJob
from pdd_core.agent.protocol import Frame, FrameType, control, token_ids
from pdd_core.agent.runtime import Conn
from pdd_core.agent.trace import mark
from pdd_core.engine.protocol import KVBlock, PrefillResult, block_hashes, pace

log = logging.getLogger("pdd_core.agent.prefill")  # one logger for P's process


class PrefillAgent(KVTransfer):
    """Serves GENERATE frames; one worker batches prefills, one task per request ships KV."""

    role = "prefill"

    def __init__(self, config: Any, agent_id: str) -> None:
        super().__init__(config, agent_id)
        self.cache = BlockCache(config.limits.p_cache_tokens, self.engine.block_size)
        self.queue: asyncio.Queue[PrefillJob] = asyncio.Queue()
        self.cancelled: set[str] = set()
        self.queued: set[str] = set()
        self._offload = offloads(config)
        self._checks: dict[str, asyncio.Future[str | None]] = {}  # rid -> the relay, or None

    async def start(self) -> None:
        await super().start()
        self.spawn(self._worker())

    async def on_gateway(self, conn: Conn) -> None:
        await self.cache_event(list(self.cache.blocks), [], True)

    async def handle(self, conn: Conn, frame: Frame) -> None:
        if frame.type is FrameType.GENERATE:
            prompt = token_ids(frame.body, "prompt_tokens")
            if not prompt:
                await conn.send(control(FrameType.ERROR, frame.request_id, {"code": "bad_request"}))
                return
            self.queued.add(frame.request_id)
            self.queue.put_nowait(PrefillJob(conn, frame.request_id, prompt, dict(frame.body)))
        elif frame.type is FrameType.RELAY_CHECK:
            relay = frame.body.get("rld")
            self._checked(frame.request_id, relay if isinstance(relay, str) else None)
        elif frame.type is FrameType.CANCEL:
            if frame.request_id in self.queued:
                self.cancelled.add(frame.request_id)
            self._checked(frame.request_id, None)

    def _checked(self, rid: str, relay: str | None) -> None:
        waiter = self._checks.pop(rid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(relay)

    async def _worker(self) -> None:
        batch_limit = self.config.limits.prefill_batch
        while True:
            batch = [await self.queue.get()]
            while len(batch) < batch_limit and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            done: list[tuple[PrefillJob, list[KVBlock], int, int]] = []
            started, seconds = time.monotonic(), 0.0
            for job in batch:
                self.queued.discard(job.request_id)
                if job.request_id in self.cancelled:
                    self.cancelled.discard(job.request_id)
                    continue
                mark(job.request_id, "p_generate", job.arrival)
                mark(job.request_id, "p_prefill_start")
                hashes = block_hashes(job.prompt, self.engine.block_size)
                hit = self.cache.match(hashes, len(job.prompt))
                held = self.cache.get(hashes[:hit]) if hit else []
                if self._offload:  # a real engine's prefill must not stall this event loop
                    result, blocks = await asyncio.to_thread(self._prefill, job.prompt, held)
                else:
                    result, blocks = self._prefill(job.prompt, held)
                seconds += result.seconds
                self._ask_md(job, blocks)  # MD's answer crosses the WAN while P computes
                hit_tokens = min(hit * self.engine.block_size, len(job.prompt))
                done.append((job, blocks, hit_tokens, result.first_token))
            # Prefill is compute-bound: a batch takes the sum of its passes from its start (the
            # host's bookkeeping counts toward it). Its KV exists (is cached, and announced to
            # the gateway) only when the pass has ended.
            await pace(started, seconds)
            for job, blocks, hit_tokens, first in done:
                mark(job.request_id, "p_prefill_end")
                added, removed = self.cache.store(blocks)
                await self.cache_event(added, removed, False)
                self._await_check(job)
                # The pass's hit and miss: the gateway's record counts the prefill the client
                # got, known from here on (before any token, which may come on another line).
                counts = {"hit_tokens": hit_tokens, "miss_tokens": len(job.prompt) - hit_tokens}
                prefilled = control(FrameType.PREFILLED, job.request_id, counts)
                await self.to_gateway(job.conn, prefilled)
                self.spawn(self._ship(job, blocks, hit_tokens, first))

    def _await_check(self, job: PrefillJob) -> None:
        """A P-MD request's route is checked again by the gateway when its prefill ends (its
        answer to PREFILLED is a RELAY_CHECK): wait for it from before PREFILLED goes out."""
        if job.meta.get("pipeline") != "P-MD" or not isinstance(job.meta.get("md"), str):
            return
        waiter: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._checks[job.request_id] = waiter
        job.rechecked = asyncio.ensure_future(self._rechecked(job, waiter))

    async def _rechecked(
        self, job: PrefillJob, waiter: asyncio.Future[str | None]
    ) -> dict[str, Any]:
        """The request's meta once the gateway has answered (bounded: without an answer within
        ``idle_timeout_s`` P-MD stands, as it would if the gateway had said so)."""
        try:
            relay = await asyncio.wait_for(waiter, self.config.limits.idle_timeout_s)
        except TimeoutError:
            log.warning("%s: no RELAY_CHECK from the gateway; P-MD stands", job.request_id)
            relay = None
        finally:
            self._checks.pop(job.request_id, None)
        if relay is not None:
            job.meta.update(pipeline="P-RLD-MD", rld=relay)
            mark(job.request_id, "p_relayed")
        return job.meta

    def _prefill(
        self, prompt: list[int], held: list[KVBlock]
    ) -> tuple[PrefillResult, list[KVBlock]]:
        """Prefill over the cached blocks ``held``; the result and the prompt's KV blocks."""
        cached = self.engine.import_blocks(held) if held else None
        result = self.engine.prefill(prompt, cached)
        return result, self.engine.export_blocks(result.kv)
