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
live in ``gateway.route.Router``, running a request in ``gateway.run.RequestRunner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Mapping
from typing import Any

from pdd_core.agent.config import AgentSpec, DataPlaneConfig
from pdd_core.agent.engines import Predictor
from pdd_core.agent.gateway.attempt import Attempt
from pdd_core.agent.gateway.control import applied, keys_path, load_keys, save_keys
from pdd_core.agent.gateway.probe import PROBE_TIMEOUT_S, LinkProbe
from pdd_core.agent.gateway.route import Router
from pdd_core.agent.gateway.run import RequestRunner
from pdd_core.agent.gateway.types import RecordContext
from pdd_core.agent.journal import Journal
from pdd_core.agent.membership import with_members
from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import PeerLink, hello, plane_auth
from pdd_core.agent.tls import PlaneTls
from pdd_core.engine.tokenizer import EOS, TextTokenizer, tokenizer_for
from pdd_core.records import RequestRecord

log = logging.getLogger("pdd_core.agent.gateway")  # one logger for the gateway's process
RECONNECT_S = 1.0
DECODE_BUCKET = 1024  # prompt tokens per memoised decode bound (decodable_tokens)
SERVED_ROLES = ("prefill", "relay", "main")  # the agents a gateway routes to


def context_window(config: DataPlaneConfig) -> int:
    """Tokens a request may hold (prompt plus output): the model's ``max_context`` from the
    catalog, lowered by ``limits.max_prompt_tokens`` when that is set (non-zero)."""
    from pdd_core.specs import load_models

    window = load_models()[config.engine.model].max_context
    cap = config.limits.max_prompt_tokens
    return min(window, cap) if cap > 0 else window


class Gateway(RequestRunner):
    """Connections, cache views, routing and request execution (HTTP lives in ``api``)."""

    def __init__(self, config: DataPlaneConfig, agent_id: str) -> None:
        self.config = config
        self.config_version: int | None = None
        self.local_tenants = dict(config.tenants)
        self.served = 0
        self.spec = config.agent(agent_id)
        self.tokenizer: TextTokenizer = tokenizer_for(config.engine.kind)
        self.eos = EOS  # the model's end-of-sequence id: a stream ending on it stopped
        if config.engine.kind == "llamacpp":  # the GGUF file's own vocabulary and EOS
            from pdd_core.engine.llamacpp_vocab import gguf_tokenizer

            self.tokenizer, self.eos = gguf_tokenizer(config.engine.llamacpp)
        self.context_tokens = context_window(config)
        self._decodable: dict[int, int | None] = {}
        self.me = hello("gateway", agent_id, config.model)
        auth = plane_auth(config)
        self.tls = PlaneTls(config, agent_id)
        self.links: dict[str, PeerLink] = {}
        self.active: dict[str, asyncio.Queue[tuple[str, Frame | None]]] = {}
        self.avoid: set[str] = set()  # agents a resumed request must not be routed to
        self.journal = Journal(config.journal_dir, agent_id, config.journal_max_bytes)
        self.keys_path = keys_path(config.journal_dir, agent_id)
        self._tasks: set[asyncio.Task[None]] = set()
        self.router = Router(self, Predictor(config), config.engine.block_size)
        self._auth = auth
        self.probe = LinkProbe({}, self._lost)
        # Attempts in flight by request id: what each still needs of which agent (a draining
        # agent is stopped once no attempt would be lost with it: ``holding``).
        self.attempts: dict[str, Attempt] = {}
        for agent in config.agents:
            if agent.role in SERVED_ROLES:
                self._add_link(agent)

    def _add_link(self, agent: AgentSpec) -> None:
        """Connect (lazily) to ``agent``: its link, cache view, queue, decode slots, and a WAN
        probe when it is across the line."""
        self.router.watch(agent)
        link = PeerLink(
            agent.id,
            self.config.address_of(agent.id, self.spec.site),
            self.me,
            functools.partial(self.on_frame, agent.id),
            self._on_down,
            role=agent.role,
            connect_timeout_s=self.config.limits.connect_timeout_s,
            auth=self._auth,
            tls=functools.partial(self.tls.client, agent.id),
        )
        self.links[agent.id] = link
        if agent.site != self.spec.site:
            self.probe.watch(agent.id, link)

    async def update_members(self, fresh: DataPlaneConfig) -> None:
        """The plane's membership changed (``agent.membership``, its reconciler started or
        drained agents): link to new agents (routable once connected), stop routing to
        draining ones (their requests in flight go on), forget stopped ones."""
        self.config = with_members(self.config, fresh)
        self.tls.follow(self.config)
        for agent in self.config.agents:
            if agent.role not in SERVED_ROLES:
                continue
            if agent.id not in self.links:
                self._add_link(agent)
                log.info("%s (%s) joined the plane", agent.id, agent.role)
            elif agent.state == "stopped" and agent.id in self.probe.links:
                self.probe.forget(agent.id)
        await self._connect_all()

    def holding(self, agent_id: str) -> int:
        """Attempts in flight that losing ``agent_id`` now would doom (``Attempt.fatal``): a
        draining agent may stop when this is 0 (what it holds was handed over or finished)."""
        return sum(attempt.fatal(agent_id) for attempt in self.attempts.values())

    def decodable_tokens(self, prompt: int) -> int | None:
        """The most output tokens a request of ``prompt`` tokens can get within
        ``limits.request_timeout_s``, or None when the engine reports no step time (a real
        engine's is its own).

        A lower bound on the time of ``n`` tokens is ``n`` decode steps of one sequence on the
        fastest decoder, at the context's mean ``prompt + n / 2`` (a step grows with the
        context it reads; batches are slower still): the largest ``n`` whose bound fits is
        found by bisection, for the prompt rounded down to ``DECODE_BUCKET`` tokens (a shorter
        context only raises the bound, so no request that fits is refused) and memoised.
        """
        bucket = prompt // DECODE_BUCKET * DECODE_BUCKET
        if bucket not in self._decodable:
            self._decodable[bucket] = self._decodable_from(bucket)
        return self._decodable[bucket]

    def _decodable_from(self, prompt: int) -> int | None:
        timeout = self.config.limits.request_timeout_s

        def step(context: float) -> float:
            steps = (
                self.router.predictor.decode_step_s(r, 1, int(context)) for r in ("relay", "main")
            )
            return min(steps)

        if step(prompt) <= 0:
            return None
        low, high = 1, max(1, int(timeout / step(prompt)))  # high: at the prompt's step
        while low < high:
            middle = (low + high + 1) // 2
            if middle * step(prompt + middle / 2) <= timeout:
                low = middle
            else:
                high = middle - 1
        return low

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

        live = {a.id for a in self.config.agents if a.state in ("serving", "draining")}
        await asyncio.gather(*(one(link) for name, link in self.links.items() if name in live))

    async def _keep_connected(self) -> None:
        while True:
            await asyncio.sleep(RECONNECT_S)
            await self._connect_all()

    def up(self, role: str, *, draining: bool = False) -> list[str]:
        """Agents of ``role`` to route to: serving (and draining ones too, when ``draining``),
        connected, answering probes, not being avoided."""
        down = self.avoid | self.probe.unreachable
        states = ("serving", "draining") if draining else ("serving",)
        return [a.id for a in self.config.of_role(role)
                if a.state in states and self.links[a.id].up and a.id not in down]  # fmt: skip

    async def on_frame(self, agent_id: str, frame: Frame) -> None:
        """A frame from an agent's link: a cache event updates the gateway's view of that
        agent's prefix cache; any other frame goes to the request it belongs to."""
        if agent_id in self.probe.links:
            self.probe.answered(agent_id)  # any frame shows the path works
        if self.probe.is_probe(frame):
            return
        if frame.type is FrameType.CACHE_EVENT:
            self.router.cache_event(agent_id, frame.body)
            return
        queue = self.active.get(frame.request_id)
        if queue is not None:
            queue.put_nowait((agent_id, frame))

    def _on_down(self, link: PeerLink) -> None:
        self.router.views[link.name].clear()
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
                if not agent.routable:
                    why.append(f"{agent.id}: {agent.state}")
                elif not self.links[agent.id].up:
                    why.append(f"{agent.id}: not connected")
                elif agent.id in self.probe.unreachable:
                    why.append(f"{agent.id}: silent for over {PROBE_TIMEOUT_S:g} s (WAN probe)")
                elif agent.id in self.avoid:
                    why.append(f"{agent.id}: failed this request")
        return f"no {stage[0]} is reachable ({'; '.join(why) or 'none configured'})"

    async def apply_control_config(self, version: int, document: Mapping[str, Any]) -> None:
        """Swap in a control-plane configuration (``AgentLink``'s apply callback), all at once
        (``gateway.control.applied``: one assignment, so a request sees old or new), and save
        its key map for a restart (``gateway.control.save_keys``)."""
        self.config = applied(self.config, self.local_tenants, version, document)
        self.config_version = version
        keys = document.get("tenant_keys")
        if isinstance(keys, Mapping):
            try:
                given = {str(k).lower(): str(v) for k, v in keys.items()}
                save_keys(self.keys_path, version, given)
            except OSError as exc:
                log.error("cannot save the key map to %s: %s", self.keys_path, exc)

    def restore_keys(self) -> None:
        """Start from the control plane's last key map (a gateway joining a control plane does
        this before it serves): it holds until the control plane answers again."""
        saved = load_keys(self.keys_path)
        if saved is not None:
            version, keys = saved
            self.config = applied(self.config, self.local_tenants, version, {"tenant_keys": keys})
            log.warning(
                "using the control plane's key map of config %s (%d keys) saved in %s until "
                "the control plane answers", version, len(keys), self.keys_path,
            )  # fmt: skip

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
        """Journal the complete record of a request (``types.gateway_record``: its figures and its
        fate); a ``served`` one counts in the heartbeat's ``requests_served``."""
        self.journal.append(record.to_json())
        if served:
            self.served += 1
