"""The gateway's core: route a request with ``pdd_core.routing``, drive it, merge its stream.

The gateway keeps one connection to every P, RLD and MD (MD across the WAN) and a live view
of the block hashes each P cache and MD DRC holds, fed by their ``CACHE_EVENT`` frames. A
request is routed by the simulator's own functions: ``choose_instance`` picks the P that
finishes its prefill soonest (queue + prefill of its miss), ``choose_pipeline`` the path from
the hits and the predicted WAN transfer, ``predict_rejection`` answers 429 when the predicted
TTFT breaks the SLA. The decode agents are told the request first, then P; tokens come back
from RLD and MD tagged with their output index, and the merge delivers index after index, so
a token is never repeated or skipped across a handoff. Every wait is bounded: a dead agent
fails its requests at once, a silent one after ``idle_timeout_s``. Routing and reservations
live in ``gateway_route.Router``, running a request in ``gateway_run.RequestRunner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Mapping
from typing import Any

from pdd_core.agent.admission import Admission
from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.engines import Predictor
from pdd_core.agent.gateway_control import applied
from pdd_core.agent.gateway_probe import PROBE_TIMEOUT_S, LinkProbe
from pdd_core.agent.gateway_route import Router
from pdd_core.agent.gateway_run import RequestRunner
from pdd_core.agent.gateway_types import RecordContext
from pdd_core.agent.journal import Journal, RequestRecord
from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import PeerLink, hello, plane_auth
from pdd_core.engine.tokenizer import EOS, TextTokenizer, tokenizer_for

log = logging.getLogger(__name__)
RECONNECT_S = 1.0


def context_window(config: DataPlaneConfig) -> int:
    """Tokens a request may hold (prompt plus output): the model's ``max_context`` from the
    catalog, lowered by ``limits.max_prompt_tokens`` when that is set (non-zero)."""
    from pdd_core.specs import load_models

    window = load_models()[config.engine.model].max_context
    cap = config.limits.max_prompt_tokens
    return min(window, cap) if cap > 0 else window


class Gateway(Router, RequestRunner):
    """Connections, cache views, routing and request execution (HTTP lives in gateway_api)."""

    def __init__(self, config: DataPlaneConfig, agent_id: str) -> None:
        self.config = config
        self.local_tenants = dict(config.tenants)
        self.served = 0
        self.spec = config.agent(agent_id)
        self.predictor = Predictor(config)
        self.tokenizer: TextTokenizer = tokenizer_for(config.engine.kind)
        self.eos = EOS  # the model's end-of-sequence id: a stream ending on it stopped
        if config.engine.kind == "llamacpp":  # the GGUF file's own vocabulary and EOS
            from pdd_core.engine.llamacpp_vocab import gguf_tokenizer

            self.tokenizer, self.eos = gguf_tokenizer(config.engine.llamacpp)
        self.context_tokens = context_window(config)
        self.block_size = config.engine.block_size
        self.me = hello("gateway", agent_id, config.model)
        auth = plane_auth(config)
        self.links: dict[str, PeerLink] = {}
        self.views: dict[str, set[int]] = {}
        self.queued_s: dict[str, float] = {}
        self.active: dict[str, asyncio.Queue[tuple[str, Frame | None]]] = {}
        self.avoid: set[str] = set()  # agents a resumed request must not be routed to
        self.journal = Journal(config.journal_dir, agent_id, config.journal_max_bytes)
        self._tasks: set[asyncio.Task[None]] = set()
        self._tickets = itertools.count(1)
        self._reserved: dict[int, tuple[str, float]] = {}
        self._hashes: dict[int, list[int]] = {}  # ticket -> the prompt's block hashes
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
                    functools.partial(self.on_frame, agent.id),
                    self._on_down,
                    connect_timeout_s=config.limits.connect_timeout_s,
                    auth=auth,
                )
        remote = {a.id: self.links[a.id] for a in config.agents if a.id in self.links
                  and a.site != self.spec.site}  # fmt: skip
        self.probe = LinkProbe(remote, self._lost)

    async def start(self) -> None:
        for job in (self._keep_connected(), self.probe.run()):
            task = asyncio.create_task(job)
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
        """Agents of ``role`` to route to: connected, answering probes, not being avoided."""
        down = self.avoid | self.probe.unreachable
        return [a.id for a in self.config.of_role(role) if self.links[a.id].up and a.id not in down]

    async def on_frame(self, agent_id: str, frame: Frame) -> None:
        """A frame from an agent's link: a cache event updates the gateway's view of that
        agent's prefix cache; any other frame goes to the request it belongs to."""
        if agent_id in self.probe.links:
            self.probe.answered(agent_id)  # any frame shows the path works
        if self.probe.is_probe(frame):
            return
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
        self._lost(link.name)

    def _lost(self, agent_id: str) -> None:
        """Tell every request in flight that ``agent_id`` is gone (each decides if it cares)."""
        for queue in self.active.values():
            queue.put_nowait((agent_id, None))

    def unreachable(self, prefill_up: bool) -> str:
        """Why no request can be routed: the stage with no agent, and why each agent is out."""
        stage = ("decode agent (relay or main decode)", ("relay", "main")) if prefill_up else (
            "prefill agent", ("prefill",))  # fmt: skip
        why = []
        for role in stage[1]:
            for agent in self.config.of_role(role):
                if not self.links[agent.id].up:
                    why.append(f"{agent.id}: not connected")
                elif agent.id in self.probe.unreachable:
                    why.append(f"{agent.id}: silent for over {PROBE_TIMEOUT_S:g} s (WAN probe)")
                elif agent.id in self.avoid:
                    why.append(f"{agent.id}: failed this request")
        return f"no {stage[0]} is reachable ({'; '.join(why) or 'none configured'})"

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
            "journal_budget_bytes": 2 * self.journal.segment_bytes,
            "journal_budget_remaining_bytes": self.journal.budget_remaining_bytes,
            "requests_served": self.served,
            "in_flight": len(self.active),
        }

    def record_context(self, tenant: str, key_prefix: str) -> RecordContext:
        """Who a record of this gateway is for (tenant and key) and who writes it."""
        return RecordContext(
            tenant,
            key_prefix,
            self.config.model,
            self.spec.site,
            self.spec.id,
        )

    def journal_record(self, record: RequestRecord, *, served: bool) -> None:
        """Journal the complete record of a request (``gateway_record``: its figures and its
        fate); a ``served`` one counts in the heartbeat's ``requests_served``."""
        self.journal.append(record.to_json())
        if served:
            self.served += 1
