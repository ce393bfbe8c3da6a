"""After a prefill: the KV's way to its decoder, and the relay's handoff to MD.

``Simulator`` (``engine.py``) mixes this in. Per policy (``engine``'s module docstring): the
KV goes over RDMA to D (same-dc) or RLD, and over the WAN to MD, which gets only the blocks its
DRC lacks (pdd); a relayed request that ends on RLD first cancels its WAN transfer. When MD has
the KV, RLD's eager tokens are handed over at its next step boundary (``on_probe``): one-shot or
extend-decode, each chunk's KV recomputed by MD from the token IDs or shipped over the WAN,
whichever is predicted sooner; with no room at MD yet, RLD keeps decoding and asks again when a
sequence leaves that MD.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable

from pdd_core.cache import RadixCache
from pdd_core.estimates import link_s, ship_kv_instead
from pdd_core.routing import HandoffMode, Pipeline, choose_handoff_mode
from pdd_core.sim.config import Policy
from pdd_core.sim.features import Features
from pdd_core.sim.instance import Instance, Job, Seq
from pdd_core.sim.records import Flight
from pdd_core.specs import Role
from pdd_core.transfer import JitterDraws, transfer_time
from pdd_core.workload import Request


def remember(cache: RadixCache, hashes: tuple[int, ...]) -> None:
    """Cache a request's blocks (``insert`` touches a cached path as ``match`` does)."""
    if hashes:
        cache.insert(hashes)


class AfterPrefill(Features):
    """The KV's transfers and RLD's handoffs of the simulated system (mixed into
    ``Simulator``, which sets these attributes and schedules the events)."""

    _md_waiters: defaultdict[int, deque[Seq]]  # relayed sequences waiting for room at each MD
    _rdma_rng: JitterDraws
    schedule: Callable[[float, Callable[[], None]], None]

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

    def _wake_md_waiter(self, md_index: int, now: float) -> None:
        """A sequence left MD ``md_index``: the oldest relayed request waiting for room there
        asks again (FIFO; one at a time, so a freed slot is offered once)."""
        waiters = self._md_waiters.get(md_index)
        while waiters:
            seq = waiters.popleft()
            if not seq.flight.done and seq.in_batch:
                self._relay_of(seq).probe(seq, now)
                return

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
