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
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pdd_core.agent.admission import Admission, servable
from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.engines import Predictor
from pdd_core.agent.gateway_control import applied
from pdd_core.agent.gateway_probe import PROBE_TIMEOUT_S, LinkProbe
from pdd_core.agent.gateway_run import RequestRunner
from pdd_core.agent.gateway_types import (
    RecordContext,
    Route,
    UpstreamError,
)
from pdd_core.agent.journal import Journal, RequestRecord
from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import PeerLink, hello, plane_auth
from pdd_core.engine.protocol import block_hashes
from pdd_core.engine.tokenizer import EOS, TextTokenizer, tokenizer_for
from pdd_core.predict import (
    DecodeState,
    LinkState,
    PrefillState,
    choose_relay,
    predict,
    predicted_ttft_s,
    relay_at_prefill_end,
)
from pdd_core.routing import (
    Pipeline,
    predict_rejection,
)

log = logging.getLogger(__name__)
RECONNECT_S = 1.0
KV_UNKNOWN = 1 << 62  # the agents do not report their KV pools: slots bound admission
FORCED = "forced by the request"


def context_window(config: DataPlaneConfig) -> int:
    """Tokens a request may hold (prompt plus output): the model's ``max_context`` from the
    catalog, lowered by ``limits.max_prompt_tokens`` when that is set (non-zero)."""
    from pdd_core.specs import load_models

    window = load_models()[config.engine.model].max_context
    cap = config.limits.max_prompt_tokens
    return min(window, cap) if cap > 0 else window


class Gateway(RequestRunner):
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

    def _hit(self, agent_id: str, hashes: list[int], input_tokens: int) -> int:
        view = self.views[agent_id]
        held = 0
        for h in hashes:
            if h not in view:
                break
            held += 1
        return min(held * self.block_size, input_tokens)

    def prompt_hashes(self, prompt: list[int]) -> list[int]:
        """The prompt's block hashes, computed where the prompt is taken in (the API does it
        in the tokenizer's thread), so the routing decision itself never hashes."""
        return block_hashes(prompt, self.block_size)

    def route(
        self,
        prompt: list[int],
        max_tokens: int,
        override: dict[str, Any],
        hashes: list[int] | None = None,
    ) -> Route:
        """Decide P, pipeline, MD and RLD for a prompt (or a rejection), as the simulator does:
        ``pdd_core.predict.predict`` on the state this gateway observes (``predict_state``).

        Only agents that are up and have a free decode slot are candidates; a pipeline whose
        decode stage has none falls back to the other decode path, and with neither the
        request is rejected (429) before it costs anything.
        """
        if hashes is None:
            hashes = self.prompt_hashes(prompt)
        prefills = self.up("prefill")
        relays_up, mains_up = self.up("relay"), self.up("main")
        if not prefills or not (relays_up or mains_up):
            raise UpstreamError(self.unreachable(bool(prefills)))
        relays = self.admission.with_room(relays_up)
        mains = self.admission.with_room(mains_up)
        state = self.predict_state(prompt, hashes, prefills, relays, mains)
        guess = predict(
            input_tokens=len(prompt), output_tokens=max_tokens, **state,
            table=self.config.routing, sla=self.config.sla,
        )  # fmt: skip
        pipeline, reason = guess.pipeline, guess.reason
        forced = override.get("pipeline")
        is_forced = self.config.allow_route_override and forced in {p.value for p in Pipeline}
        if is_forced and isinstance(forced, str):
            pipeline, reason = Pipeline(forced), FORCED
        main = mains[guess.md_index] if guess.md_index >= 0 else None
        served, reason = servable(pipeline, reason, bool(relays), main is not None)
        relay_index = guess.relay_index if guess.relay_index >= 0 else choose_relay(
            state["relays"])  # fmt: skip
        relay = relays[relay_index] if relays and served is not Pipeline.P_MD else None
        if served is guess.pipeline:
            ttft = guess.predicted_ttft_s
        elif served is Pipeline.P_MD:
            ttft = predicted_ttft_s(guess.p_wait_s, guess.prefill_s, guess.wan_s, guess.md_wait_s)
        else:
            ttft = predicted_ttft_s(guess.p_wait_s, guess.prefill_s, 0.0, 0.0)
        full = served is None
        rejected = full or predict_rejection(ttft, self.config.sla, self.config.routing)
        if rejected and not full:
            reason = f"predicted TTFT {ttft:.1f} s over the {self.config.sla.ttft_p99_s:g} s target"
        prefill = prefills[guess.prefill_index]
        ticket = next(self._tickets)
        if not rejected:  # reserve the prefill and the slots now: a burst sees its own load
            self._reserved[ticket] = (prefill, guess.prefill_s)
            self.queued_s[prefill] += guess.prefill_s
            decoder = main if served is not Pipeline.P_RLD else None
            # The WAN flow is not counted yet: it starts when the prefill ends (``flow_starts``).
            self.admission.hold(ticket, (relay, decoder), 0.0)
            self._hashes[ticket] = hashes
        return Route(
            pipeline=served or pipeline,
            reason=reason,
            prefill=prefill,
            relay=relay,
            main=main if served not in (Pipeline.P_RLD, None) else None,
            hit_tokens_p=guess.hit_tokens_p,
            hit_tokens_md=guess.hit_tokens_md,
            predicted_ttft_s=ttft,
            prefill_s=guess.prefill_s,
            rejected=rejected,
            retry_after_s=1 if full else max(1, math.ceil(guess.p_wait_s)),
            ticket=ticket,
            forced=is_forced,
        )

    def predict_state(
        self,
        prompt: list[int],
        hashes: list[int],
        prefills: list[str],
        relays: list[str],
        mains: list[str],
    ) -> dict[str, Any]:
        """What this gateway observes, in ``pdd_core.predict``'s terms (its docstring defines
        each field): P queues are the prefill seconds reserved and not yet prefilled, hits come
        from the cache views, decode load is the slots held, the WAN's flows are the KV
        transfers routed and not yet reported done, and its recent utilisation; the in-site path
        to RLD is not modelled."""
        n = len(prompt)
        p_states = []
        for agent in prefills:
            cached = self._hit(agent, hashes, n)
            p_states.append(
                PrefillState(
                    self.queued_s[agent], cached, self.predictor.prefill_s(n - cached, cached)
                )
            )
        return {
            "prefills": p_states,
            "mains": [self._decode_state("main", a, self._hit(a, hashes, n)) for a in mains],
            "relays": [self._decode_state("relay", a, 0) for a in relays],
            "wan": self._wan_state() if mains else None,
            "rdma": None,
            "kv_bytes_per_token": self.predictor.kv_bytes_per_token,
        }

    def _wan_state(self) -> LinkState:
        """The line as ``predict`` sees it: the KV transfers on it now (each from the end of its
        prefill until MD has the KV, as the simulator's line counts them) and its utilisation."""
        wan = self.config.wan
        return LinkState(
            wan.bandwidth_gbps,
            wan.rtt_ms,
            len(self.admission.wan),
            utilisation=self.admission.utilisation(),
        )

    def recheck(
        self, route: Route, input_tokens: int, elapsed_s: float, *, relay: bool = False
    ) -> Route:
        """A P-MD route checked again when its prefill ends, as the simulator does
        (``predict.relay_at_prefill_end`` on the line's flows and the decoders' slots of now,
        MD's DRC hit from its cache view): the same route, or P-RLD-MD through the relay it
        names, whose slot is then held. Call it before ``flow_starts``: the line's flows do
        not count the request's own transfer. A forced pipeline stays as forced, unless
        ``relay`` forces this check's answer too (demos and tests: ``relay_at_prefill_end``)."""
        relays = self.admission.with_room(self.up("relay"))
        if route.main is None or not relays or (route.forced and not relay):
            return route
        states = [self._decode_state("relay", a, 0) for a in relays]
        if relay:
            index, reason = choose_relay(states), FORCED
        else:
            hashes = self._hashes.get(route.ticket, [])
            hit = self._hit(route.main, hashes, input_tokens)
            index = relay_at_prefill_end(
                elapsed_s,
                input_tokens=input_tokens,
                main=self._decode_state("main", route.main, hit),
                relays=states,
                wan=self._wan_state(),
                rdma=None,
                kv_bytes_per_token=self.predictor.kv_bytes_per_token,
                sla=self.config.sla,
            )
            reason = "P-MD would miss the TTFT target when the prefill ended: relay"
        if index < 0:
            return route
        chosen = relays[index]
        self.admission.end_slot(route.ticket, route.main)  # held again, beside the relay's
        self.admission.hold(route.ticket, (chosen, route.main), 0.0)
        return replace(route, pipeline=Pipeline.P_RLD_MD, relay=chosen, reason=reason)

    def flow_starts(self, route: Route, input_tokens: int) -> None:
        """The request's KV starts across the WAN (its prefill ended): one more flow on the
        line until MD reports the KV landed (``flow_ends``), even when MD's DRC holds every
        block (the KV_DONE still crosses, as a zero-byte transfer does in the simulator).
        Admission keys the flow apart from the route's slots (``-ticket``): it starts later."""
        if route.main is not None:
            nbytes = self.predictor.kv_bytes(input_tokens - route.hit_tokens_md)
            self.admission.hold(-route.ticket, (), max(nbytes, 1.0))

    def flow_ends(self, route: Route) -> None:
        """MD has the request's KV: its flow leaves the line (idempotent)."""
        self.admission.release(-route.ticket)

    def _decode_state(self, role: str, agent: str, hit: int) -> DecodeState:
        held = self.admission.held[agent]
        return DecodeState(
            active=held,
            max_batch=self.admission.capacity[agent],
            free_kv_tokens=KV_UNKNOWN,
            step_s=self.predictor.decode_step_s(role, held) if held else 0.0,
            hit_tokens=hit,
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
        self.flow_ends(route)
        self._hashes.pop(route.ticket, None)

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
