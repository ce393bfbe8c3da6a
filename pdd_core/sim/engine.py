"""The event loop: requests arrive, get routed, prefilled, moved, decoded, and recorded.

A heap of ``(time, sequence, callback)`` events drives ``Instance`` passes (see
``instance.py``), WAN lines (``wan.py``) and fixed-time RDMA transfers. Arrivals are pulled from
the request iterator one at a time (or, closed-loop, each session's next turn when its previous
one ends: ``sessions.py``), so the heap holds only what is in flight. Every routing feature is
``pdd_core.predict``'s (``features.py``), every decision ``pdd_core.routing``'s; every duration
is ``pdd_core.perf``'s or ``pdd_core.transfer``'s.

Per policy (DOMAIN.md sections 2-4):

- ``colocated``: each instance prefills (from its own prefix cache) and decodes.
- ``same-dc``: P -> whole KV over RDMA -> D (no prefix cache at D).
- ``naive-cross-dc``: P in A -> whole KV over the WAN -> D in B.
- ``pdd``: P-MD sends only the blocks MD's DRC lacks over the WAN; P-RLD-MD sends the KV to
  RLD over RDMA and to MD over the WAN at once, RLD decodes eagerly, and when MD has the KV the
  eager tokens are handed over (one-shot or extend-decode; per chunk MD recomputes their KV
  from the token IDs or receives it over the WAN, whichever is predicted sooner); a relayed
  request that ends on RLD first cancels its WAN transfer; singular requests are finished on
  RLD with no WAN transfer.

The first token of a request is sampled at the end of its prefill and emitted when the
decoding instance admits the sequence, so a lone request's TTFT is exactly prefill + transfer.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from heapq import heappop, heappush

import numpy as np

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.estimates import choose_prefill, link_s, ship_kv_instead
from pdd_core.predict import LinkState, PrefillState
from pdd_core.routing import (
    HandoffMode,
    Pipeline,
    RoutingTable,
    choose_handoff_mode,
)
from pdd_core.sim.builder import build_instances
from pdd_core.sim.config import Policy, SimConfig
from pdd_core.sim.features import Features
from pdd_core.sim.gc_budget import fewer_collections
from pdd_core.sim.instance import Instance, Job, Seq
from pdd_core.sim.records import Flight, RequestRecord, rejected_record
from pdd_core.sim.sessions import ClosedLoop
from pdd_core.specs import SLA, Role, Topology
from pdd_core.transfer import JitterDraws, transfer_time
from pdd_core.tuples import new_tuple
from pdd_core.workload import Request


def remember(cache: RadixCache, hashes: tuple[int, ...]) -> None:
    """Cache a request's blocks (``insert`` touches a cached path as ``match`` does)."""
    if hashes:
        cache.insert(hashes)


class Simulator(Features):
    """One run of ``policy`` on ``topology``; call ``run(requests)`` once."""

    def __init__(
        self,
        topology: Topology,
        policy: Policy,
        *,
        model_id: str,
        sla: SLA,
        table: RoutingTable,
        config: SimConfig,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.policy = policy
        self.topology = topology
        self.model = topology.models[model_id]
        # ``perf.kv_bytes`` per token, read once: the spec computes it on every access.
        self._kv_per_token = perf.kv_bytes(self.model, 1)
        self.sla = sla
        self.table = table
        self.config = config
        self.now = 0.0
        self.records: list[RequestRecord] = []
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._next_seq = self._seq.__next__  # bound once: ``schedule`` runs per event
        self._progress = progress
        self._sessions: ClosedLoop | None = None
        # Relayed sequences waiting for room at each MD before their handoff (FIFO).
        self._md_waiters: defaultdict[int, deque[Seq]] = defaultdict(deque)
        # Every draw of the run (WAN and RDMA jitter) goes through it, in blocks.
        rng = JitterDraws(np.random.default_rng(config.seed))
        built = build_instances(self, topology, policy, model=self.model, config=config, rng=rng)
        self.prefill = built.prefill
        self.relay = built.relay
        self.decode = built.decode
        self.rdma = built.rdma
        self._rdma_link = LinkState.of(built.rdma) if built.rdma is not None else None
        self.wan = built.wan
        self._rdma_rng = rng

    # ---- Host protocol --------------------------------------------------------------------

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        heappush(self._heap, (t, self._next_seq(), fn))

    def on_seq_finished(self, seq: Seq, now: float) -> None:
        flight = seq.flight
        if seq.role is Role.RELAY_DECODE:
            flight.tokens_rld = seq.done
            if flight.wan_flow >= 0 and math.isnan(flight.wan_done_s) and self.wan is not None:
                # Finished on RLD before MD got its KV: the transfer is no longer needed.
                sent = self.wan.cancel(flight.wan_flow, now)
                if sent is not None:
                    flight.wan_bytes = sent
        else:
            flight.tokens_md = seq.done
            self._wake_md_waiter(flight.md_index, now)
        self._finish(flight, now)

    def _wake_md_waiter(self, md_index: int, now: float) -> None:
        """A sequence left MD ``md_index``: the oldest relayed request waiting for room there
        asks again (FIFO; one at a time, so a freed slot is offered once)."""
        waiters = self._md_waiters.get(md_index)
        while waiters:
            seq = waiters.popleft()
            if not seq.flight.done and seq.in_batch:
                self._relay_of(seq).probe(seq, now)
                return

    def on_probe(self, seq: Seq, now: float) -> bool:
        """A relayed request at RLD's step boundary after MD got its KV: hand over tokens."""
        flight = seq.flight
        if flight.done:
            return False
        pending = seq.done - flight.absorbed
        if flight.handoff_mode is HandoffMode.NONE:
            relay = self._relay_of(seq)
            wait = self._md_admission_wait(flight, seq.context)
            if wait > 0:
                # MD has no room for the sequence yet: RLD keeps decoding (masking MD's queue
                # is what the relay is for) and asks again when a sequence leaves that MD.
                self._md_waiters[flight.md_index].append(seq)
                return False
            flight.handoff_mode = choose_handoff_mode(seq.done, relay.load, self.table)
        chunk = self.table.handoff_chunk_tokens
        if flight.handoff_mode is HandoffMode.ONE_SHOT or pending <= chunk:
            flight.tokens_rld = seq.done
            self._md_extend(flight, pending, final=True, now=now)
            return True
        self._md_extend(flight, chunk, final=False, now=now)
        return False

    # ---- the loop -------------------------------------------------------------------------

    def run(self, requests: Iterable[Request]) -> list[RequestRecord]:
        if self.config.closed_loop:
            self._sessions = ClosedLoop(requests)
            requests = self._sessions.first
        arrivals = iter(requests)
        last = -1.0
        heap = self._heap

        def pull() -> None:
            nonlocal last
            request = next(arrivals, None)
            if request is None:
                return
            if request.arrival_s < last:
                raise ValueError(f"requests: not sorted by arrival at {request.id!r}")
            last = request.arrival_s

            def arrive() -> None:
                self._arrive(request)
                pull()

            self.schedule(request.arrival_s, arrive)

        pull()
        with fewer_collections():
            while heap:
                t, _, fn = heappop(heap)
                self.now = t
                fn()
        return self.records

    def _finish(self, flight: Flight, now: float) -> None:
        flight.done = True
        self.records.append(flight.record(now))
        if self._progress is not None:
            self._progress(len(self.records))
        if self._sessions is not None:
            self._next_turn(flight.request, now)

    def _reject(self, request: Request, pipeline: Pipeline, reason: str, hit: int) -> None:
        self.records.append(rejected_record(request, pipeline, reason, hit))
        if self._progress is not None:
            self._progress(len(self.records))
        if self._sessions is not None:
            self._next_turn(request, self.now)

    def _next_turn(self, request: Request, ended_s: float) -> None:
        assert self._sessions is not None
        turn = self._sessions.after(request, ended_s)
        if turn is not None:
            self.schedule(turn.arrival_s, lambda: self._arrive(turn))

    # ---- arrival and routing -------------------------------------------------------------

    def _arrive(self, request: Request) -> None:
        size = request.input_tokens
        prefills = []
        for inst in self.prefill:
            hit = self._hit(inst, request)
            est = inst.prefill_s(size - hit, hit)
            prefills.append(new_tuple(PrefillState, (inst.backlog_s, hit, est)))
        flight = Flight(request, Pipeline.P_D)
        if self.policy is Policy.PDD:
            prediction = self._predict_pdd(request, prefills, flight.output)
            p_index = prediction.prefill_index
            flight.pipeline = prediction.pipeline
            flight.md_index = prediction.md_index
            flight.relay_index = prediction.relay_index
            rejected = prediction.rejected
        else:
            p_index = choose_prefill(prefills)
            rejected = self._reject_baseline(prefills[p_index], flight)
        hit = prefills[p_index].hit_tokens
        if rejected:
            self._reject(request, flight.pipeline, "predicted TTFT over the SLA", hit)
            return
        p_inst = self.prefill[p_index]
        # No ``match`` here: the insert after prefill touches the same path (LRU order).
        flight.hit_p = hit
        flight.miss = size - hit
        p_inst.add_job(
            Job(
                flight,
                flight.miss,
                hit,
                prefills[p_index].prefill_s,
                lambda t: self._prefilled(flight, p_inst, t),
                on_start=lambda job: self._rematch(job, p_inst),
            ),
            self.now,
        )

    def _rematch(self, job: Job, p_inst: Instance) -> None:
        """Read P's prefix cache again as the job's first pass starts, as a live P (and an
        engine's scheduler) does: blocks an earlier turn stored while this one queued count,
        blocks evicted meanwhile do not. Routing used the hit seen at arrival."""
        flight = job.flight
        hit = self._hit(p_inst, flight.request)
        flight.hit_p = job.cached = hit
        flight.miss = job.remaining = flight.request.input_tokens - hit

    def _relay_of(self, seq: Seq) -> Instance:
        return self.relay[seq.flight.relay_index]

    def _rdma_s(self, tokens: int, rng: JitterDraws | None) -> float:
        if self.rdma is None:
            raise ValueError("links: the policy needs an rdma link inside the prefill site")
        return transfer_time(self.rdma, tokens * self._kv_per_token, rng)

    # ---- after prefill -------------------------------------------------------------------

    def _prefilled(self, flight: Flight, p_inst: Instance, now: float) -> None:
        request = flight.request
        flight.prefill_end_s = now
        if p_inst.cache is not None:
            remember(p_inst.cache, request.block_hashes)
        pipeline = flight.pipeline
        if pipeline is Pipeline.COLOCATED:
            seq = Seq(flight, request.input_tokens, flight.output, Role.PREFILL, flight.hit_p)
            p_inst.add_seq(seq, now)
        elif self.policy is Policy.SAME_DC:
            delay = self._rdma_s(request.input_tokens, self._rdma_rng)
            flight.transfer_s = delay
            target = self.decode[self._least_loaded(self.decode)]
            seq = Seq(flight, request.input_tokens, flight.output, Role.MAIN_DECODE)
            self.schedule(now + delay, lambda: target.add_seq(seq, self.now))
        elif self.policy is Policy.NAIVE_CROSS_DC:
            self._to_md(flight, self._least_loaded(self.decode), now)
        elif pipeline is Pipeline.P_MD:
            # MD's DRC hit now, read once for the check and the transfer (``peek`` is pure).
            hit = self._hit(self.decode[flight.md_index], request) if self.config.drc else 0
            if self._relay_now(flight, now, hit):
                self._to_relay(flight, now, hit)
            else:
                self._to_md(flight, flight.md_index, now, hit)
        else:
            self._to_relay(flight, now)

    def _wan_bytes(self, flight: Flight, md: Instance, hit: int | None = None) -> float:
        """Bytes of the KV ``md`` lacks; ``hit``: its DRC hit if already read at this moment."""
        request = flight.request
        if self.policy is Policy.PDD and self.config.drc:
            flight.hit_md = self._hit(md, request) if hit is None else hit
        return (request.input_tokens - flight.hit_md) * self._kv_per_token

    def _drc_insert(self, md: Instance, request: Request) -> None:
        if self.config.drc and md.cache is not None:
            remember(md.cache, request.block_hashes)

    def _to_md(self, flight: Flight, index: int, now: float, hit: int | None = None) -> None:
        """Ship the KV MD lacks over the WAN; MD starts decoding when it lands."""
        assert self.wan is not None
        md = self.decode[index]
        nbytes = self._wan_bytes(flight, md, hit)
        flight.wan_bytes = nbytes

        def landed(t: float) -> None:
            flight.transfer_s = t - now
            flight.wan_done_s = t
            self._drc_insert(md, flight.request)
            request = flight.request
            seq = Seq(flight, request.input_tokens, flight.output, Role.MAIN_DECODE, flight.hit_md)
            md.add_seq(seq, t)

        self.wan.start(nbytes, now, landed)

    def _to_relay(self, flight: Flight, now: float, hit: int | None = None) -> None:
        """RDMA to RLD (and, unless singular, the WAN to MD at the same time)."""
        request = flight.request
        relay = self.relay[flight.relay_index]
        delay = self._rdma_s(request.input_tokens, self._rdma_rng)
        flight.transfer_s = delay

        def at_relay() -> None:
            if flight.md_ready:  # MD already has the KV: no relay needed
                self._md_join(flight, self.now)
                return
            seq = Seq(flight, request.input_tokens, flight.output, Role.RELAY_DECODE)
            flight.relay = seq
            relay.add_seq(seq, self.now)

        self.schedule(now + delay, at_relay)
        if flight.pipeline is Pipeline.P_RLD:
            return
        assert self.wan is not None
        md = self.decode[flight.md_index]
        nbytes = self._wan_bytes(flight, md, hit)
        flight.wan_bytes = nbytes

        def landed(t: float) -> None:
            flight.wan_done_s = t
            self._drc_insert(md, request)
            if flight.done:
                return
            seq = flight.relay
            if not isinstance(seq, Seq):
                flight.md_ready = True
            elif (
                not seq.in_batch
                and self._md_admission_wait(flight, request.input_tokens) == 0.0
                and relay.withdraw(seq)
            ):
                # RLD has not started it and MD has room now: MD takes it from the start.
                # Without room, RLD keeps it (masking MD's queue is what the relay is for,
                # as ``on_probe`` does) and the handoff waits for RLD's step boundary.
                flight.relay = None
                self._md_join(flight, t)
            else:
                relay.probe(seq, t)

        flight.wan_flow = self.wan.start(nbytes, now, landed)

    def _md_join(self, flight: Flight, now: float) -> None:
        md = self.decode[flight.md_index]
        request = flight.request
        tokens = flight.output - flight.absorbed
        context = request.input_tokens + flight.absorbed
        md.add_seq(Seq(flight, context, tokens, Role.MAIN_DECODE, flight.hit_md), now)

    def _md_extend(self, flight: Flight, tokens: int, *, final: bool, now: float) -> None:
        """MD absorbs ``tokens`` eager tokens: it recomputes their KV from the token IDs (an
        extend pass, ``perf.extend_time``, MLA included) or receives their KV over the WAN,
        whichever ``estimates.ship_kv_instead`` says is sooner at this moment."""
        md = self.decode[flight.md_index]
        if tokens <= 0:
            self._md_join(flight, now)
            return
        context = flight.request.input_tokens + flight.absorbed

        def extended(t: float) -> None:
            if flight.done:
                return
            flight.absorbed += tokens
            if final:
                self._md_join(flight, t)
            elif isinstance(flight.relay, Seq):
                self._relay_of(flight.relay).probe(flight.relay, t)

        est = md.extend_s(tokens, context)
        nbytes = tokens * self._kv_per_token
        assert self.wan is not None
        if ship_kv_instead(est, link_s(self._wan_state(), nbytes)):
            flight.kv_handoffs += 1
            flight.wan_bytes += nbytes
            self.wan.start(nbytes, now, extended)
            return
        flight.id_handoffs += 1
        md.add_job(Job(flight, tokens, context, est, extended), now)
