"""The event loop: requests arrive, get routed, prefilled, moved, decoded, and recorded.

A heap of ``(time, sequence, callback)`` events drives ``Instance`` passes (see
``instance.py``), WAN lines (``wan.py``) and fixed-time RDMA transfers. Arrivals are pulled from
the request iterator one at a time (or, closed-loop, each session's next turn when its previous
one ends: ``sessions.py``), so the heap holds only what is in flight. Every routing feature is
``pdd_core.predict``'s (``features.py``), every decision ``pdd_core.routing``'s; every duration
is ``pdd_core.perf``'s or ``pdd_core.transfer``'s. What follows a prefill (the KV's transfers
and RLD's handoffs to MD) is ``handoff.py``'s.

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
from pdd_core.estimates import choose_prefill
from pdd_core.predict import LinkState, PrefillState
from pdd_core.routing import Pipeline, RoutingTable
from pdd_core.sim.builder import build_instances
from pdd_core.sim.config import Policy, SimConfig
from pdd_core.sim.gc_budget import fewer_collections
from pdd_core.sim.handoff import AfterPrefill
from pdd_core.sim.instance import Instance, Job, Seq
from pdd_core.sim.records import Flight, SimulatedRequest, rejected_record
from pdd_core.sim.sessions import ClosedLoop
from pdd_core.sim.sinks import RecordSink
from pdd_core.specs import SLA, Role, Topology
from pdd_core.transfer import JitterDraws
from pdd_core.tuples import new_tuple
from pdd_core.workload import Request


class Simulator(AfterPrefill):
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
        sink: RecordSink | None = None,
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
        self.records: list[SimulatedRequest] = []
        # Where each record goes as its request ends: ``records`` unless a sink streams them.
        self._sink: RecordSink = self.records if sink is None else sink
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.schedule = self._scheduler(self._heap, self._seq.__next__)
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

    @staticmethod
    def _scheduler(
        heap: list[tuple[float, int, Callable[[], None]]], next_seq: Callable[[], int]
    ) -> Callable[[float, Callable[[], None]], None]:
        """``schedule(t, fn)``: push ``fn`` to run at ``t`` (ties in the order scheduled). A
        closure over the heap and the counter rather than a method: it runs for every event,
        and reads them from its cells instead of looking them up on the simulator each time."""

        def schedule(t: float, fn: Callable[[], None]) -> None:
            heappush(heap, (t, next_seq(), fn))

        return schedule

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

    # ---- the loop -------------------------------------------------------------------------

    def run(self, requests: Iterable[Request]) -> list[SimulatedRequest]:
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
        # A relayed flight and its RLD sequence point at each other; dropping the link here
        # lets reference counting free both as soon as the run lets go of them, instead of
        # leaving ~10k cycles per run for a garbage collection that walks every survivor
        # (on the Mooncake bench trace it was ~10% of a PDD run's CPU). Nothing reads
        # ``relay`` of a finished flight: every callback checks ``done`` first.
        flight.relay = None
        self._sink.append(flight.record(now))
        if self._progress is not None:
            self._progress(len(self._sink))
        if self._sessions is not None:
            self._next_turn(flight.request, now)

    def _reject(self, request: Request, pipeline: Pipeline, reason: str, hit: int) -> None:
        self._sink.append(rejected_record(request, pipeline, reason, hit))
        if self._progress is not None:
            self._progress(len(self._sink))
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
