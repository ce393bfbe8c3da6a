"""The event loop: requests arrive, get routed, prefilled, moved, decoded, and recorded.

A heap of ``(time, sequence, callback)`` events drives ``Instance`` passes (see
``instance.py``), WAN lines (``wan.py``) and fixed-time RDMA transfers. Arrivals are pulled from
the request iterator one at a time, so the heap holds only what is in flight. Every routing
decision is ``pdd_core.routing``'s; every duration is ``pdd_core.perf``'s or
``pdd_core.transfer``'s.

Per policy (DOMAIN.md sections 2-4):

- ``colocated``: each instance prefills (from its own prefix cache) and decodes.
- ``same-dc``: P -> whole KV over RDMA -> D (no prefix cache at D).
- ``naive-cross-dc``: P in A -> whole KV over the WAN -> D in B.
- ``pdd``: P-MD sends only the blocks MD's DRC lacks over the WAN; P-RLD-MD sends the KV to
  RLD over RDMA and to MD over the WAN at once, RLD decodes eagerly, and when MD has the KV the
  token IDs are handed over (one-shot or extend-decode, MD paying ``perf.extend_time``);
  singular requests are finished on RLD with no WAN transfer.

The first token of a request is emitted by the first decode step of the instance that decodes
it, so a lone request's TTFT is exactly prefill + transfer + first step.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable

import numpy as np

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.routing import (
    HandoffMode,
    InstanceView,
    Pipeline,
    RouteFeatures,
    RoutingTable,
    choose_handoff_mode,
    choose_instance,
    choose_pipeline,
    predict_rejection,
)
from pdd_core.sim.builder import build_instances
from pdd_core.sim.config import Policy, SimConfig
from pdd_core.sim.instance import Instance, Job, Seq, prefill_s
from pdd_core.sim.records import Flight, RequestRecord, rejected_record
from pdd_core.specs import SLA, Role, Topology
from pdd_core.transfer import transfer_time
from pdd_core.workload import Request


def remember(cache: RadixCache, hashes: tuple[int, ...]) -> None:
    """Cache a request's blocks; a path already fully cached is only touched (cheaper)."""
    if not hashes:
        return
    if cache.peek(hashes) == len(hashes):
        cache.match(hashes, record=False)
    else:
        cache.insert(hashes)


class Simulator:
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
        self.sla = sla
        self.table = table
        self.config = config
        self.now = 0.0
        self.records: list[RequestRecord] = []
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._progress = progress
        rng = np.random.default_rng(config.seed)
        built = build_instances(self, topology, policy, model=self.model, config=config, rng=rng)
        self.prefill = built.prefill
        self.relay = built.relay
        self.decode = built.decode
        self.rdma = built.rdma
        self.wan = built.wan
        self._rdma_rng = rng

    # ---- Host protocol --------------------------------------------------------------------

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), fn))

    def on_seq_finished(self, seq: Seq, now: float) -> None:
        flight = seq.flight
        if seq.role is Role.RELAY_DECODE:
            flight.tokens_rld = seq.done
        else:
            flight.tokens_md = seq.done
        self._finish(flight, now)

    def on_probe(self, seq: Seq, now: float) -> bool:
        """A relayed request at RLD's step boundary after MD got its KV: hand over tokens."""
        flight = seq.flight
        if flight.done:
            return False
        pending = seq.done - flight.absorbed
        if flight.handoff_mode is HandoffMode.NONE:
            relay = self.relay[0] if len(self.relay) == 1 else self._relay_of(seq)
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
        while heap:
            t, _, fn = heapq.heappop(heap)
            self.now = t
            fn()
        return self.records

    def _finish(self, flight: Flight, now: float) -> None:
        flight.done = True
        self.records.append(flight.record(now))
        if self._progress is not None:
            self._progress(len(self.records))

    def _reject(self, request: Request, pipeline: Pipeline, reason: str, hit: int) -> None:
        self.records.append(rejected_record(request, pipeline, reason, hit))
        if self._progress is not None:
            self._progress(len(self.records))

    # ---- arrival and routing -------------------------------------------------------------

    def _hit(self, inst: Instance, request: Request) -> int:
        if inst.cache is None or not request.block_hashes:
            return 0
        blocks = inst.cache.peek(request.block_hashes)
        return min(blocks * self.config.block_size, request.input_tokens - 1)

    def _arrive(self, request: Request) -> None:
        views = []
        for index, inst in enumerate(self.prefill):
            hit = self._hit(inst, request)
            est = prefill_s(self.model, inst.chip, request.input_tokens - hit, hit, inst.tp)
            views.append(InstanceView(index, hit, inst.backlog_s, est))
        p_view = choose_instance(views)
        p_inst = self.prefill[p_view.index]
        hit = p_view.cached_tokens
        flight = Flight(request, Pipeline.P_D)
        first_step = p_inst.step_time(1, request.input_tokens)
        base = p_view.queue_s + p_view.service_s + first_step
        if self.policy is Policy.COLOCATED:
            flight.pipeline = Pipeline.COLOCATED
            predicted = base + p_inst.predicted_wait_s(request.input_tokens + flight.output)
        elif self.policy is Policy.SAME_DC:
            predicted = base + self._rdma_s(request.input_tokens, None)
        elif self.policy is Policy.NAIVE_CROSS_DC:
            assert self.wan is not None
            predicted = base + self.wan.predicted_s(perf.kv_bytes(self.model, request.input_tokens))
        else:
            predicted = base + self._route_pdd(flight, request, hit)
        if predict_rejection(predicted, self.sla, self.table):
            self._reject(request, flight.pipeline, "predicted TTFT over the SLA", hit)
            return
        # No ``match`` here: the insert after prefill touches the same path (LRU order).
        flight.hit_p = hit
        flight.miss = request.input_tokens - hit
        p_inst.add_job(
            Job(
                flight,
                flight.miss,
                hit,
                p_view.service_s,
                lambda t: self._prefilled(flight, p_inst, t),
            ),
            self.now,
        )

    def _route_pdd(self, flight: Flight, request: Request, hit: int) -> float:
        """Choose MD and the pipeline; return the predicted transfer + wait part of TTFT."""
        assert self.wan is not None
        reserve = request.input_tokens + flight.output
        views = []
        for index, md in enumerate(self.decode):
            md_hit = self._hit(md, request) if self.config.drc else 0
            wan_s = self.wan.predicted_s(perf.kv_bytes(self.model, request.input_tokens - md_hit))
            views.append(InstanceView(index, md_hit, md.predicted_wait_s(reserve), wan_s))
        md_view = choose_instance(views)
        flight.md_index = md_view.index
        features = RouteFeatures(
            input_tokens=request.input_tokens,
            hit_tokens_p=hit,
            hit_tokens_md=md_view.cached_tokens,
            predicted_output_tokens=flight.output,
            wan_transfer_s=md_view.service_s,
        )
        flight.pipeline = choose_pipeline(features, self.table).pipeline
        if flight.pipeline is Pipeline.P_MD:
            return md_view.service_s + md_view.queue_s
        relay = self._least_loaded_relay()
        return self._rdma_s(request.input_tokens, None) + relay.predicted_wait_s(reserve)

    def _least_loaded_relay(self) -> Instance:
        return min(self.relay, key=lambda r: r.load)

    def _relay_of(self, seq: Seq) -> Instance:
        for inst in self.relay:
            if seq in inst.batch:
                return inst
        return self.relay[0]

    def _rdma_s(self, tokens: int, rng: np.random.Generator | None) -> float:
        if self.rdma is None:
            raise ValueError("links: the policy needs an rdma link inside the prefill site")
        return transfer_time(self.rdma, perf.kv_bytes(self.model, tokens), rng)

    # ---- after prefill -------------------------------------------------------------------

    def _prefilled(self, flight: Flight, p_inst: Instance, now: float) -> None:
        request = flight.request
        flight.prefill_end_s = now
        if p_inst.cache is not None:
            remember(p_inst.cache, request.block_hashes)
        pipeline = flight.pipeline
        if pipeline is Pipeline.COLOCATED:
            p_inst.add_seq(Seq(flight, request.input_tokens, flight.output, Role.PREFILL), now)
        elif self.policy is Policy.SAME_DC:
            delay = self._rdma_s(request.input_tokens, self._rdma_rng)
            flight.transfer_s = delay
            target = min(self.decode, key=lambda d: d.load)
            seq = Seq(flight, request.input_tokens, flight.output, Role.MAIN_DECODE)
            self.schedule(now + delay, lambda: target.add_seq(seq, self.now))
        elif self.policy is Policy.NAIVE_CROSS_DC:
            self._to_md(
                flight, min(range(len(self.decode)), key=lambda i: self.decode[i].load), now
            )
        elif pipeline is Pipeline.P_MD:
            self._to_md(flight, flight.md_index, now)
        else:
            self._to_relay(flight, now)

    def _wan_bytes(self, flight: Flight, md: Instance) -> float:
        request = flight.request
        if self.policy is Policy.PDD and self.config.drc:
            flight.hit_md = self._hit(md, request)
        return perf.kv_bytes(self.model, request.input_tokens - flight.hit_md)

    def _drc_insert(self, md: Instance, request: Request) -> None:
        if self.config.drc and md.cache is not None:
            remember(md.cache, request.block_hashes)

    def _to_md(self, flight: Flight, index: int, now: float) -> None:
        """Ship the KV MD lacks over the WAN; MD starts decoding when it lands."""
        assert self.wan is not None
        md = self.decode[index]
        nbytes = self._wan_bytes(flight, md)
        flight.wan_bytes = nbytes

        def landed(t: float) -> None:
            flight.transfer_s = t - now
            flight.wan_done_s = t
            self._drc_insert(md, flight.request)
            request = flight.request
            md.add_seq(Seq(flight, request.input_tokens, flight.output, Role.MAIN_DECODE), t)

        self.wan.start(nbytes, now, landed)

    def _to_relay(self, flight: Flight, now: float) -> None:
        """RDMA to RLD (and, unless singular, the WAN to MD at the same time)."""
        request = flight.request
        relay = self._least_loaded_relay()
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
        nbytes = self._wan_bytes(flight, md)
        flight.wan_bytes = nbytes

        def landed(t: float) -> None:
            flight.wan_done_s = t
            self._drc_insert(md, request)
            if flight.done:
                return
            seq = flight.relay
            if not isinstance(seq, Seq):
                flight.md_ready = True
            elif not seq.in_batch and relay.withdraw(seq):
                flight.relay = None
                self._md_join(flight, t)
            else:
                relay.probe(seq, t)

        self.wan.start(nbytes, now, landed)

    def _md_join(self, flight: Flight, now: float) -> None:
        md = self.decode[flight.md_index]
        request = flight.request
        tokens = flight.output - flight.absorbed
        md.add_seq(
            Seq(flight, request.input_tokens + flight.absorbed, tokens, Role.MAIN_DECODE), now
        )

    def _md_extend(self, flight: Flight, tokens: int, *, final: bool, now: float) -> None:
        """MD recomputes ``tokens`` handed-over token IDs on top of what it holds."""
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

        est = perf.extend_time(self.model, md.chip, tokens, context, md.tp).seconds
        md.add_job(Job(flight, tokens, context, est, extended), now)
