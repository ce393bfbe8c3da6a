"""The simulator's view of its instances and links as ``pdd_core.predict`` state.

``Simulator`` (``engine.py``) mixes this in: every routing feature it uses is computed here by
filling ``predict``'s plain state from the simulated instances and lines and calling its
functions, exactly as the gateway fills it from what it observes.
"""

from __future__ import annotations

from pdd_core.estimates import decode_wait_s, least, link_s
from pdd_core.predict import (
    LinkState,
    Prediction,
    PrefillState,
    predict,
    predicted_ttft_s,
    relay_at_prefill_end,
)
from pdd_core.routing import Pipeline, RoutingTable, predict_rejection
from pdd_core.sim.config import Policy, SimConfig
from pdd_core.sim.instance import Instance
from pdd_core.sim.records import Flight
from pdd_core.sim.wan import WanLine
from pdd_core.specs import SLA, LinkSpec
from pdd_core.tuples import new_tuple
from pdd_core.workload import Request


class Features:
    """Routing features of the simulated system (mixed into ``Simulator``)."""

    policy: Policy
    config: SimConfig
    sla: SLA
    table: RoutingTable
    now: float
    prefill: list[Instance]
    relay: list[Instance]
    decode: list[Instance]
    rdma: LinkSpec | None
    wan: WanLine | None
    _kv_per_token: float
    # ``LinkState.of(rdma)``, built once: the fabric's state never changes during a run.
    _rdma_link: LinkState | None

    def _hit(self, inst: Instance, request: Request) -> int:
        if inst.cache is None or not request.block_hashes:
            return 0
        hit = inst.cache.peek(request.block_hashes) * self.config.block_size
        last = request.input_tokens - 1  # at least one token is computed (``min`` written out)
        return hit if hit < last else last

    def _wan_state(self) -> LinkState:
        assert self.wan is not None
        config = self.config
        spec = self.wan.spec
        # ``LinkState.of`` with the fields in order (bandwidth_gbps, rtt_ms, flows, setup_ms,
        # initial_window_bytes, utilisation; ``tuples.new_tuple``): once or twice per request.
        return new_tuple(
            LinkState,
            (
                spec.bandwidth_gbps,
                spec.rtt_ms,
                self.wan.link.active_flows,
                config.wan_setup_ms,
                config.wan_initial_window_bytes,
                self.wan.utilisation(self.now),
            ),
        )

    def _reject_baseline(self, p: PrefillState, flight: Flight) -> bool:
        """Predicted TTFT of a baseline policy (``pdd_core.predict``), over the SLA or not."""
        size = flight.request.input_tokens
        transfer = wait = 0.0
        if self.policy is Policy.COLOCATED:
            flight.pipeline = Pipeline.COLOCATED
        else:
            target = self.decode[self._least_loaded(self.decode)].decode_state()
            wait = decode_wait_s(target, size + 1)
            nbytes = size * self._kv_per_token
            if self.policy is Policy.SAME_DC:
                transfer = link_s(self._rdma_state(), nbytes)
            else:
                transfer = link_s(self._wan_state(), nbytes)
        ttft = predicted_ttft_s(p.queued_s, p.prefill_s, transfer, wait)
        return predict_rejection(ttft, self.sla, self.table)

    def _predict_pdd(
        self, request: Request, prefills: list[PrefillState], output: int
    ) -> Prediction:
        drc = self.config.drc
        mains = [md.decode_state(self._hit(md, request) if drc else 0) for md in self.decode]
        return predict(
            input_tokens=request.input_tokens,
            output_tokens=output,
            prefills=prefills,
            mains=mains,
            relays=[r.decode_state() for r in self.relay],
            wan=self._wan_state(),
            rdma=self._rdma_state(),
            kv_bytes_per_token=self._kv_per_token,
            table=self.table,
            sla=self.sla,
        )

    def _rdma_state(self) -> LinkState:
        if self._rdma_link is None:
            raise ValueError("links: the policy needs an rdma link inside the prefill site")
        return self._rdma_link

    def _least_loaded(self, instances: list[Instance]) -> int:
        """``predict.choose_relay``'s rule (least ``decode_load``, lower index on ties)."""
        return least([i.load for i in instances])

    def _relay_now(self, flight: Flight, now: float, hit: int) -> bool:
        """Check P-MD again when the KV is ready (``predict.relay_at_prefill_end``, with the
        line's flows and the decoders' queues of now, ``hit`` MD's DRC hit now, 0 without
        DRC); switch to the relay if it is sooner."""
        request = flight.request
        md = self.decode[flight.md_index]
        relay_index = relay_at_prefill_end(
            now - flight.arrival_s,
            input_tokens=request.input_tokens,
            main=md.decode_state(hit),
            relays=[r.decode_state() for r in self.relay],
            wan=self._wan_state(),
            rdma=self._rdma_state(),
            kv_bytes_per_token=self._kv_per_token,
            sla=self.sla,
        )
        if relay_index < 0:
            return False
        flight.pipeline = Pipeline.P_RLD_MD
        flight.relay_index = relay_index
        return True

    def _md_admission_wait(self, flight: Flight, context: int) -> float:
        """``estimates.decode_wait_s`` of the request's MD for its context (DRC prefix shared)."""
        md = self.decode[flight.md_index]
        return decode_wait_s(md.decode_state(flight.hit_md), context - flight.hit_md + 1)
