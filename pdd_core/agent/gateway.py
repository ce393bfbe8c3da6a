"""The gateway's core: route a request with ``pdd_core.routing``, drive it, merge its stream.

The gateway keeps one connection to every P, RLD and MD (MD across the WAN) and a live view
of the block hashes each P cache and MD DRC holds, fed by their ``CACHE_EVENT`` frames. A
request is routed by the simulator's own functions: ``choose_instance`` picks the P that
finishes its prefill soonest (queue + prefill of its miss), ``choose_pipeline`` the path from
the hits and the predicted WAN transfer, ``predict_rejection`` answers 429 when the predicted
TTFT breaks the SLA. The decode agents are told the request first, then P; tokens come back
from RLD and MD tagged with their output index, and the merge delivers index after index, so
a token is never repeated or skipped across a handoff. Every wait is bounded: a dead agent
fails its requests at once, a silent one after ``idle_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import time
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from pdd_core.agent.admission import Admission, servable
from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.gateway_control import applied
from pdd_core.agent.gateway_types import (
    Outcome,
    RecordContext,
    Route,
    StreamMerge,
    UpstreamError,
    gateway_record,
)
from pdd_core.agent.journal import Journal
from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import PeerLink, Predictor, hello, plane_auth
from pdd_core.engine.protocol import block_hashes
from pdd_core.engine.tokenizer import EOS, TextTokenizer, tokenizer_for
from pdd_core.routing import (
    InstanceView,
    Pipeline,
    RouteFeatures,
    choose_instance,
    choose_pipeline,
    predict_rejection,
)

log = logging.getLogger(__name__)
RECONNECT_S = 1.0


def context_window(config: DataPlaneConfig) -> int:
    """Tokens a request may hold (prompt plus output): the model's ``max_context`` from the
    catalog, lowered by ``limits.max_prompt_tokens`` when that is set (non-zero)."""
    from pdd_core.specs import load_models

    window = load_models()[config.engine.model].max_context
    cap = config.limits.max_prompt_tokens
    return min(window, cap) if cap > 0 else window


class Gateway:
    """Connections, cache views, routing and request execution (HTTP lives in gateway_api)."""

    def __init__(self, config: DataPlaneConfig, agent_id: str) -> None:
        self.config = config
        self.local_tenants = dict(config.tenants)
        self.served = 0
        self.spec = config.agent(agent_id)
        self.predictor = Predictor(config)
        self.tokenizer: TextTokenizer = tokenizer_for(config.engine.kind)
        self.context_tokens = context_window(config)
        self.block_size = config.engine.block_size
        self.me = hello("gateway", agent_id, config.model)
        auth = plane_auth(config)
        self.links: dict[str, PeerLink] = {}
        self.views: dict[str, set[int]] = {}
        self.queued_s: dict[str, float] = {}
        self.active: dict[str, asyncio.Queue[tuple[str, Frame | None]]] = {}
        self.journal = Journal(config.journal_dir, agent_id, config.journal_max_bytes)
        self._tasks: set[asyncio.Task[None]] = set()
        self._tickets = itertools.count(1)
        self._reserved: dict[int, tuple[str, float]] = {}
        limits = config.limits
        self.admission = Admission(
            {a.id: limits.relay_batch for a in config.of_role("relay")}
            | {a.id: limits.decode_batch for a in config.of_role("main")}
        )
        for role in ("prefill", "relay", "main"):
            for agent in config.of_role(role):
                self.views[agent.id] = set()
                self.queued_s[agent.id] = 0.0
                self.links[agent.id] = PeerLink(
                    agent.id,
                    config.address_of(agent.id, self.spec.site),
                    self.me,
                    functools.partial(self._on_frame, agent.id),
                    self._on_down,
                    connect_timeout_s=config.limits.connect_timeout_s,
                    auth=auth,
                )

    async def start(self) -> None:
        task = asyncio.create_task(self._keep_connected())
        self._tasks.add(task)
        await self._connect_all()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for link in self.links.values():
            await link.close()

    async def _connect_all(self) -> None:
        async def one(link: PeerLink) -> None:
            if link.up:
                return
            with contextlib.suppress(ConnectionError):
                await link.send(control(FrameType.PING))  # registers this gateway there

        await asyncio.gather(*(one(link) for link in self.links.values()))

    async def _keep_connected(self) -> None:
        while True:
            await asyncio.sleep(RECONNECT_S)
            await self._connect_all()

    def up(self, role: str) -> list[str]:
        return [a.id for a in self.config.of_role(role) if self.links[a.id].up]

    async def _on_frame(self, agent_id: str, frame: Frame) -> None:
        if frame.type is FrameType.CACHE_EVENT:
            view = self.views[agent_id]
            if frame.body.get("reset"):
                view.clear()
            view.update(h for h in frame.body.get("added", []) if isinstance(h, int))
            view.difference_update(h for h in frame.body.get("removed", []) if isinstance(h, int))
            return
        queue = self.active.get(frame.request_id)
        if queue is not None:
            queue.put_nowait((agent_id, frame))

    def _on_down(self, link: PeerLink) -> None:
        self.views[link.name].clear()
        for queue in self.active.values():
            queue.put_nowait((link.name, None))

    def _hit(self, agent_id: str, hashes: list[int], input_tokens: int) -> int:
        view = self.views[agent_id]
        held = 0
        for h in hashes:
            if h not in view:
                break
            held += 1
        return min(held * self.block_size, input_tokens)

    def route(self, prompt: list[int], max_tokens: int, override: dict[str, Any]) -> Route:
        """Decide P, pipeline, MD and RLD for a prompt (or a rejection), as the simulator does.

        Only agents that are up and have a free decode slot are candidates; a pipeline whose
        decode stage has none falls back to the other decode path, and with neither the
        request is rejected (429) before it costs anything.
        """
        hashes = block_hashes(prompt, self.block_size)
        prefills = self.up("prefill")
        relays_up, mains_up = self.up("relay"), self.up("main")
        if not prefills or not (relays_up or mains_up):
            raise UpstreamError("no prefill or decode agent is reachable")
        relays = self.admission.with_room(relays_up)
        mains = self.admission.with_room(mains_up)
        views = []
        for index, agent in enumerate(prefills):
            cached = self._hit(agent, hashes, len(prompt))
            service = self.predictor.prefill_s(len(prompt) - cached, cached)
            views.append(InstanceView(index, cached, self.queued_s[agent], service))
        chosen = choose_instance(views)
        prefill = prefills[chosen.index]
        main, hit_md, transfer, wan_bytes = None, 0, math.inf, 0.0
        if mains:
            md_views = []
            for index, agent in enumerate(mains):
                cached = self._hit(agent, hashes, len(prompt))
                mine = self.predictor.kv_bytes(len(prompt) - cached)
                seconds = self.predictor.transfer_s(mine, self.admission.wan_backlog(mine))
                wait = self.predictor.decode_step_s("main", self.admission.held[agent] + 1)
                md_views.append(InstanceView(index, cached, wait, seconds))
            md = choose_instance(md_views)
            main, hit_md, transfer = mains[md.index], md.cached_tokens, md.service_s
            wan_bytes = self.predictor.kv_bytes(len(prompt) - hit_md)
        features = RouteFeatures(
            input_tokens=len(prompt),
            hit_tokens_p=chosen.cached_tokens,
            hit_tokens_md=hit_md,
            predicted_output_tokens=max_tokens,
            wan_transfer_s=transfer,
        )
        decision = choose_pipeline(features, self.config.routing)
        pipeline, reason = decision.pipeline, decision.reason
        forced = override.get("pipeline")
        if self.config.allow_route_override and forced in {p.value for p in Pipeline}:
            pipeline, reason = Pipeline(forced), "forced by the request"
        served, reason = servable(pipeline, reason, bool(relays), main is not None)
        relay = relays[0] if relays and served is not Pipeline.P_MD else None
        ttft = chosen.queue_s + chosen.service_s
        if served is Pipeline.P_MD:
            ttft += transfer + self.predictor.decode_step_s("main", 1)
        else:
            held = self.admission.held[relay] if relay else 0
            ttft += self.predictor.decode_step_s("relay", held + 1)
        full = served is None
        rejected = full or predict_rejection(ttft, self.config.sla, self.config.routing)
        if rejected and not full:
            reason = f"predicted TTFT {ttft:.1f} s over the {self.config.sla.ttft_p99_s:g} s target"
        ticket = next(self._tickets)
        if not rejected:  # reserve the prefill and the slots now: a burst sees its own load
            self._reserved[ticket] = (prefill, chosen.service_s)
            self.queued_s[prefill] += chosen.service_s
            decoder = main if served is not Pipeline.P_RLD else None
            self.admission.hold(ticket, (relay, decoder), wan_bytes if decoder else 0.0)
        return Route(
            pipeline=served or pipeline,
            reason=reason,
            prefill=prefill,
            relay=relay,
            main=main if served not in (Pipeline.P_RLD, None) else None,
            hit_tokens_p=chosen.cached_tokens,
            hit_tokens_md=hit_md,
            predicted_ttft_s=ttft,
            prefill_s=chosen.service_s,
            rejected=rejected,
            retry_after_s=1 if full else max(1, math.ceil(chosen.queue_s)),
            ticket=ticket,
        )

    def release_prefill(self, route: Route) -> None:
        """Drop a request's prefill reservation (idempotent): P finished it."""
        held = self._reserved.pop(route.ticket, None)
        if held is not None:
            self.queued_s[held[0]] -= held[1]

    def release(self, route: Route) -> None:
        """Drop everything a request holds: its prefill reservation, decode slots and WAN
        flow (idempotent: finished, failed or abandoned)."""
        self.release_prefill(route)
        self.admission.release(route.ticket)

    async def generate(
        self,
        route: Route,
        prompt: list[int],
        max_tokens: int,
        tenant: str,
        override: dict[str, Any],
        *,
        request_id: str = "",
    ) -> AsyncGenerator[tuple[list[int], Outcome], None]:
        """Run a routed request; yields each batch of new tokens in order with the outcome.

        ``request_id`` is the response's ``id`` (the API picks it), so a client can find its
        request in the control plane's records; one is made up when it is not given.
        """
        rid = request_id or f"cmpl-{uuid.uuid4().hex}"
        outcome = Outcome(rid, route)
        queue: asyncio.Queue[tuple[str, Frame | None]] = asyncio.Queue()
        self.active[rid] = queue
        prefilled = False
        involved = [a for a in (route.relay, route.main) if a is not None]
        meta = {
            "max_tokens": max_tokens,
            "pipeline": route.pipeline.value,
            "tenant": tenant,
            "rld": route.relay,
            "md": route.main,
            "handoff_mode": override.get("handoff_mode")
            if self.config.allow_route_override
            else None,
        }
        finished = False
        try:
            for agent in involved:
                await self.links[agent].send(control(FrameType.GENERATE, rid, meta))
            body = dict(meta, prompt_tokens=prompt)
            await self.links[route.prefill].send(control(FrameType.GENERATE, rid, body))
            merge = StreamMerge()
            deadline = time.monotonic() + self.config.limits.request_timeout_s
            first_token_by = time.monotonic() + 2 * self.config.sla.ttft_p99_s
            while not merge.complete or not prefilled:
                # Once every token is out only the statistics are missing: wait briefly.
                # Before the first token the wait is the TTFT bound (a queue and a WAN
                # transfer may come first); between tokens a silence is a failure.
                wait = 2.0 if merge.complete else self.config.limits.idle_timeout_s
                if merge.delivered == 0 and not merge.complete:
                    wait = max(wait, first_token_by - time.monotonic())
                wait = min(wait, deadline - time.monotonic())
                try:
                    source, frame = await asyncio.wait_for(queue.get(), max(wait, 0.001))
                except TimeoutError:
                    if merge.complete:
                        break
                    raise UpstreamError("timed out waiting for the data plane") from None
                if frame is None:
                    if self._fatal(source, route, outcome, prefilled):
                        raise UpstreamError(f"agent {source} went down")
                    continue
                if frame.type is FrameType.ERROR:
                    raise UpstreamError(
                        f"{source}: {frame.body.get('code')}: {frame.body.get('message', '')}"
                    )
                if frame.type is FrameType.KV_DONE:
                    prefilled = True
                    self.release_prefill(route)
                    self.admission.end_transfer(route.ticket)
                    outcome.hit_tokens = int(frame.body.get("hit_tokens", 0))
                    outcome.miss_tokens = int(frame.body.get("miss_tokens", 0))
                    outcome.wan_bytes += int(frame.body.get("wan_bytes", 0))
                    continue
                if frame.type is not FrameType.TOKENS:
                    continue
                if "handoff_mode" in frame.body:
                    outcome.handoff_mode = str(frame.body["handoff_mode"])
                    self.admission.end_slot(route.ticket, route.relay)  # RLD is done
                index = int(frame.body.get("index", 0))
                tokens = [int(t) for t in frame.body.get("tokens", [])]
                delivered = merge.add(index, tokens, source, last=frame.end_of_stream)
                fresh = [token for token, _ in delivered]
                outcome.tokens.extend(fresh)
                from_md = sum(1 for _, origin in delivered if origin == route.main)
                outcome.md_tokens += from_md
                outcome.rld_tokens += len(delivered) - from_md
                if fresh:
                    now = time.time()
                    outcome.first_token_at = outcome.first_token_at or now
                    outcome.last_token_at = now
                    yield fresh, outcome
            finished = True
            outcome.finish_reason = (
                "stop" if outcome.tokens and outcome.tokens[-1] == EOS else "length"
            )
        finally:
            self.active.pop(rid, None)
            self.release(route)
            if not finished:
                for agent in (route.prefill, *involved):
                    link = self.links[agent]
                    if link.up:
                        with contextlib.suppress(ConnectionError, TimeoutError):
                            await asyncio.wait_for(
                                link.send(control(FrameType.CANCEL, rid, {"reason": "gateway"})),
                                1.0,
                            )

    def _fatal(self, agent: str, route: Route, outcome: Outcome, prefilled: bool) -> bool:
        """Whether losing ``agent`` dooms the request at this point."""
        if agent == route.prefill:
            return not prefilled
        if agent == route.relay:
            return route.main is None or (outcome.md_tokens == 0 and not outcome.handoff_mode)
        if agent == route.main:
            return route.relay is None or bool(outcome.handoff_mode) or outcome.md_tokens > 0
        return False

    async def apply_control_config(self, version: int, document: Mapping[str, Any]) -> None:
        """Swap in a control-plane configuration (``AgentLink``'s apply callback), all at once
        (``gateway_control.applied``: one assignment, so a request sees old or new)."""
        self.config = applied(self.config, self.local_tenants, version, document)

    def stats(self) -> dict[str, Any]:
        """What the heartbeat reports: journal backlog and losses, requests served (completed;
        429s and failures are journaled but not counted here), requests in flight."""
        return {
            "journal_pending": self.journal.pending_count,
            "journal_dropped": self.journal.dropped,
            "requests_served": self.served,
            "in_flight": len(self.active),
        }

    def journal_outcome(
        self,
        outcome: Outcome | None,
        route: Route,
        tenant: str,
        key_prefix: str,
        *,
        failed: bool,
        request_id: str = "",
        error: str = "",
    ) -> None:
        """Write the gateway's complete record of a request (or a rejection, by request_id): its
        figures and its fate (the agents of each stage, the handoff, what failed)."""
        record = gateway_record(
            outcome,
            route,
            RecordContext(tenant, key_prefix, self.config.model, self.spec.site, self.spec.id),
            self.config.sla,
            failed=failed,
            error=error,
            request_id=request_id,
        )
        self.journal.append(record.to_json())
        if not failed and not route.rejected:
            self.served += 1
