"""The gateway's router: the state it observes, in ``pdd_core.predict``'s terms, and what a
route holds while it runs. ``Gateway`` holds one ``Router`` and tells it what it sees (the cache
views' events, the agents it links to); the router reads the gateway's live configuration and
which agents are up through the ``Fleet`` it was given.

A request is routed by the simulator's own functions on what this gateway sees: its P queues
(prefill seconds reserved and not yet prefilled), the cache views' hits, the decode slots held
and the WAN flows in their window (from the end of a prefill until MD reports the KV landed).
A P-MD route is checked again when its prefill ends (``recheck``), as the simulator does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from pdd_core.agent.config import AgentSpec, DataPlaneConfig
from pdd_core.agent.engines import Predictor
from pdd_core.agent.gateway.admission import Admission, servable
from pdd_core.agent.gateway.types import Route, UpstreamError
from pdd_core.engine.protocol import block_hashes
from pdd_core.predict import (
    DecodeState,
    LinkState,
    Prediction,
    PrefillState,
    choose_relay,
    predict,
    predicted_ttft_s,
    relay_at_prefill_end,
)
from pdd_core.routing import Pipeline, predict_rejection

KV_UNKNOWN = 1 << 62  # the agents do not report their KV pools: slots bound admission
FORCED = "forced by the request"


def served_ttft_s(guess: Prediction, served: Pipeline | None) -> float:
    """The predicted TTFT of the pipeline that serves the request: the prediction's, or that
    of the decode path it fell back to for want of a free slot (no WAN without MD)."""
    if served is guess.pipeline:
        return guess.predicted_ttft_s
    if served is Pipeline.P_MD:
        return predicted_ttft_s(guess.p_wait_s, guess.prefill_s, guess.wan_s, guess.md_wait_s)
    return predicted_ttft_s(guess.p_wait_s, guess.prefill_s, 0.0, 0.0)


class Fleet(Protocol):
    """What a router reads of the gateway that holds it: the configuration applied now (the
    control plane replaces it live) and its version, the agents of a role it may route to,
    and why none can be routed to."""

    config: DataPlaneConfig
    config_version: int | None  # the control plane's version applied last (None: none yet)

    def up(self, role: str, *, draining: bool = False) -> list[str]: ...

    def unreachable(self, prefill_up: bool) -> str: ...


class Router:
    """Routing and reservations: P's queues, the cache views, the decode slots and the WAN's
    flows (``admission``) as this gateway sees them."""

    def __init__(self, fleet: Fleet, predictor: Predictor, block_size: int) -> None:
        self.fleet = fleet
        self.predictor = predictor
        self.block_size = block_size
        self.admission = Admission({})
        # agent -> the block hashes its cache (P) or DRC (MD) holds
        self.views: dict[str, set[int]] = {}
        # P -> the prefill seconds reserved on it and not yet prefilled
        self.queued_s: dict[str, float] = {}
        self._tickets = itertools.count(1)
        self._reserved: dict[int, tuple[str, float]] = {}  # ticket -> (P, its prefill seconds)
        self._hashes: dict[int, list[int]] = {}  # ticket -> the prompt's block hashes

    @property
    def config(self) -> DataPlaneConfig:
        return self.fleet.config

    def watch(self, agent: AgentSpec) -> None:
        """Route to ``agent`` from now on: an empty cache view and queue, and its decode slots
        (the configured batch of its role) when it decodes."""
        self.views[agent.id] = set()
        self.queued_s[agent.id] = 0.0
        if agent.role in ("relay", "main"):
            limits = self.config.limits
            slots = limits.relay_batch if agent.role == "relay" else limits.decode_batch
            self.admission.add(agent.id, slots)

    def cache_event(self, agent_id: str, body: Mapping[str, Any]) -> None:
        """An agent's cache (P) or DRC (MD) reported blocks added and removed, or a reset."""
        view = self.views[agent_id]
        if body.get("reset"):
            view.clear()
        view.update(h for h in body.get("added", []) if isinstance(h, int))
        view.difference_update(h for h in body.get("removed", []) if isinstance(h, int))

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
        *,
        resuming: bool = False,
    ) -> Route:
        """Decide P, pipeline, MD and RLD for a prompt (or a rejection), as the simulator does:
        ``pdd_core.predict.predict`` on the state this gateway observes (``predict_state``).

        Only agents that are up and have a free decode slot are candidates; a pipeline whose
        decode stage has none falls back to the other decode path, and with neither the
        request is rejected (429) before it costs anything. A request ``resuming`` after a
        lost agent was admitted already (its client may hold tokens): it is refused only for
        want of an agent, never for a predicted TTFT (a fault's resumes all land on the
        surviving P at once, and a prediction over the target would fail them mid-stream), and
        it may go to a draining agent when a stage has no other (it is in flight, not new).
        """
        if hashes is None:
            hashes = self.prompt_hashes(prompt)
        prefills, relays_up, mains_up = self._candidates(resuming=resuming)
        relays = self.admission.with_room(relays_up)
        mains = self.admission.with_room(mains_up)
        state = self.predict_state(prompt, hashes, prefills, relays, mains)
        guess = predict(
            input_tokens=len(prompt), output_tokens=max_tokens, **state,
            table=self.config.routing, sla=self.config.sla,
        )  # fmt: skip
        pipeline, reason, is_forced = self._chosen(guess, override)
        main = mains[guess.md_index] if guess.md_index >= 0 else None
        served, reason = servable(pipeline, reason, bool(relays), main is not None)
        relay_index = guess.relay_index if guess.relay_index >= 0 else choose_relay(
            state["relays"])  # fmt: skip
        relay = relays[relay_index] if relays and served is not Pipeline.P_MD else None
        ttft = served_ttft_s(guess, served)
        full = served is None
        rejected = full or (
            not resuming and predict_rejection(ttft, self.config.sla, self.config.routing)
        )
        if rejected and not full:
            reason = f"predicted TTFT {ttft:.1f} s over the {self.config.sla.ttft_p99_s:g} s target"
        prefill = prefills[guess.prefill_index]
        ticket = next(self._tickets)
        if not rejected:  # reserve the prefill and the slots now: a burst sees its own load
            decoder = main if served is not Pipeline.P_RLD else None
            self._reserve(ticket, prefill, guess.prefill_s, (relay, decoder), hashes)
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
            config_version=self.fleet.config_version,
        )

    def _candidates(self, *, resuming: bool) -> tuple[list[str], list[str], list[str]]:
        """The agents up for each stage (P, RLD, MD); a request resuming may also go to
        draining ones where a stage has no other (it is in flight, not new). An
        ``UpstreamError`` when no P or no decode agent is up."""
        prefills = self.fleet.up("prefill")
        relays, mains = self.fleet.up("relay"), self.fleet.up("main")
        if resuming:
            prefills = prefills or self.fleet.up("prefill", draining=True)
            if not (relays or mains):
                relays = self.fleet.up("relay", draining=True)
                mains = self.fleet.up("main", draining=True)
        if not prefills or not (relays or mains):
            raise UpstreamError(self.fleet.unreachable(bool(prefills)))
        return prefills, relays, mains

    def _chosen(self, guess: Prediction, override: dict[str, Any]) -> tuple[Pipeline, str, bool]:
        """The pipeline predicted, or the one the request forces where the configuration
        allows overrides; with its reason, and whether it was forced."""
        forced = override.get("pipeline")
        is_forced = self.config.allow_route_override and forced in {p.value for p in Pipeline}
        if is_forced and isinstance(forced, str):
            return Pipeline(forced), FORCED, is_forced
        return guess.pipeline, guess.reason, is_forced

    def _reserve(
        self,
        ticket: int,
        prefill: str,
        prefill_s: float,
        slots: tuple[str | None, str | None],
        hashes: list[int],
    ) -> None:
        """Hold a routed request's prefill seconds on its P and its decode ``slots`` (relay,
        decoder). The WAN flow is not counted yet: it starts when the prefill ends
        (``flow_starts``)."""
        self._reserved[ticket] = (prefill, prefill_s)
        self.queued_s[prefill] += prefill_s
        self.admission.hold(ticket, slots, 0.0)
        self._hashes[ticket] = hashes

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
            initial_window_bytes=self.config.wan_window_wire_bytes,
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
        relays = self.admission.with_room(self.fleet.up("relay"))
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
