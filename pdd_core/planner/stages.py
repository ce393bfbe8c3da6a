"""``evaluate``: the analytic verdict on a design, the one entry every caller uses.

``evaluate_design`` is the stage-by-stage arithmetic of ``capacity.py``'s model, each stage a
function that reads as its formula: routing shares first (singular filter, then the transfer
budget against the predicted WAN time, with the WAN stage), then RLD, P and MD, then the TTFT
distribution from the per-request paths plus the queue waits; the judge (``planner.judge``)
turns them into the verdict. Aggregated designs go to ``planner.colocated``; closed-loop
sessions are paced by ``planner.paced``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pdd_core.planner.capacity import (
    DECODE_KV,
    DECODE_TPOT,
    MAX_UTILISATION,
    PREFILL,
    RELAY,
    WAN,
    Constraint,
    Evaluation,
    Evaluator,
    StageView,
    Violation,
    Wait,
    gg_wait,
)
from pdd_core.planner.colocated import evaluate_colocated
from pdd_core.planner.design import COLOCATED, Design, PoolChoice
from pdd_core.planner.judge import tpot_at, verdict
from pdd_core.planner.paced import paced_evaluation
from pdd_core.planner.profile import FloatArray, WorkloadProfile
from pdd_core.routing import Pipeline
from pdd_core.specs import RldMode
from pdd_core.transfer import slow_start_extra_array

BoolArray = npt.NDArray[np.bool_]


def _rdma_s(ev: Evaluator, tokens: FloatArray) -> FloatArray:
    if ev.rdma is None:
        return np.zeros_like(tokens)
    rate = ev.rdma.bytes_per_s
    result: FloatArray = tokens * ev.model.kv_bytes_per_token / rate + ev.rdma.rtt_ms / 1000.0
    return result


def evaluate(ev: Evaluator, design: Design, profile: WorkloadProfile | None = None) -> Evaluation:
    """The analytic verdict on ``design`` over ``profile`` (default: ``ev``'s own), the model of
    ``planner.capacity``'s docstring; closed-loop sessions are offered the rate their answers
    pace (``planner.paced``)."""
    p = profile or ev.profile
    if not ev.same_samples(p):
        ev = ev.for_profile(p)
    if ev.config.closed_loop:
        return paced_evaluation(lambda q: evaluate_design(ev, design, q), p, ev.sla)
    return evaluate_design(ev, design, p)


@dataclass(slots=True)
class _Chain:
    """The stages evaluated so far, their violations, and whether one has no steady state (a
    saturated stage, or one that cannot hold a sequence: then there is no tail to speak of)."""

    stages: list[StageView] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    saturated: bool = False

    def fail(self, kind: Constraint, text: str) -> None:
        self.violations.append(Violation(kind, text))
        self.saturated = True


@dataclass(frozen=True, slots=True)
class _Routes:
    """Per sampled request: which pipeline it takes, and its KV's time over the WAN."""

    singular: BoolArray
    direct: BoolArray
    relayed: BoolArray
    wan_s: FloatArray


@dataclass(frozen=True, slots=True)
class _Relay:
    """RLD's first-token step, its slot wait, and the P-seconds a relay costs when shared."""

    step_s: float = 0.0
    wait: Wait = field(default_factory=lambda: Wait(0.0, 0.0))
    p_busy_per_request: float = 0.0


def evaluate_design(ev: Evaluator, design: Design, p: WorkloadProfile) -> Evaluation:
    """Stage throughputs, shares, waits and SLA verdict of ``design`` on ``p``."""
    if design.policy == COLOCATED:
        return evaluate_colocated(ev, design, p)
    pdd = ev.is_pdd(design)
    chain = _Chain()
    routes = _routes(ev, design, p, chain)
    relay = _relay(ev, design, p, routes, chain)
    service, p_wait = _prefill(ev, design, p, relay, chain)
    b_md, step_md, md_rho, md_wait = _decode(ev, design, p, routes, chain)

    # TTFT: the first token comes out of prefill (P-MD: MD's first step after the transfer; a
    # relayed request: RLD's first step, or none when RLD shares P's instance).
    first_md = step_md if math.isfinite(step_md) else 0.0
    direct = routes.direct
    if pdd:
        shared = design.rld_mode is RldMode.SHARED
        relay_path = service if shared else service + _rdma_s(ev, p.input_tokens) + relay.step_s
        base = np.where(direct, service + routes.wan_s + first_md, relay_path)
    else:
        base = service + _rdma_s(ev, p.input_tokens) + first_md
    u0, e0 = ev.draws(0)
    u1, e1 = ev.draws(1)
    waits = p_wait.draw(u0, e0)
    second = np.where(direct, md_wait.draw(u1, e1), relay.wait.draw(u1, e1))
    ttft_samples = (base + waits + second).ravel()
    tpot = _tpot(ev, design.decode, md_rho, b_md)
    return verdict(
        ev,
        design,
        p,
        ttft_samples=ttft_samples,
        base=base,
        tpot=tpot,
        stages=chain.stages,
        violations=chain.violations,
        saturated=chain.saturated,
        shares={
            str(Pipeline.P_MD if pdd else Pipeline.P_D): float(direct.mean()),
            str(Pipeline.P_RLD_MD): float(routes.relayed.mean()),
            str(Pipeline.P_RLD): float(routes.singular.mean()),
        },
    )


def _routes(ev: Evaluator, design: Design, p: WorkloadProfile, chain: _Chain) -> _Routes:
    """Routing shares (DOMAIN.md section 6): singular, then P-MD within the transfer budget
    against the predicted WAN time, else relay; the WAN stage on the way."""
    table = design.table
    n = p.input_tokens.size
    if not ev.is_pdd(design):
        everyone = np.ones(n, dtype=bool)
        return _Routes(~everyone, everyone, ~everyone, np.zeros(n))
    if ev.wan is None:
        raise ValueError("links: a PDD design needs a WAN link between P's and MD's sites")
    singular = (
        (p.input_tokens >= table.singular_min_input_tokens)
        & (p.output_tokens < table.singular_max_output_tokens)
        & (p.hit_ratio <= table.singular_max_hit)
    )
    # MD's radix cache (DRC) tracks P's hits, so only the miss crosses; without it, all of it.
    shipped = p.miss_tokens if ev.config.drc else p.input_tokens
    wan_bytes = np.where(singular, 0.0, shipped * ev.model.kv_bytes_per_token)
    line = ev.wan.bytes_per_s
    wan_rho = p.rate_rps * float(wan_bytes.mean()) / line
    slow = 1.0 - min(wan_rho, 0.999)
    rtt = ev.wan.rtt_ms / 1000.0
    # Setup and TCP slow start as the simulated line charges them (``transfer``: the ramp at
    # the line rate, whatever the share), on top of the queueing-stretched bytes.
    ramp = slow_start_extra_array(wan_bytes, line, rtt, ev.config.wan_initial_window_bytes)
    wan_s = ev.config.wan_setup_ms / 1000.0 + wan_bytes / (line * slow) + ramp + rtt
    chain.stages.append(
        StageView(
            WAN,
            wan_rho,
            line / float(wan_bytes.mean()) if wan_bytes.mean() > 0 else math.inf,
            f"{wan_rho * ev.wan.bandwidth_gbps:.1f} of {ev.wan.bandwidth_gbps:g} Gbps",
        )
    )
    if wan_rho >= MAX_UTILISATION:
        chain.fail(WAN, f"{WAN}: the miss KV needs {wan_rho:.0%} of the line")
    direct = ~singular & (wan_s <= table.transfer_budget_s)
    return _Routes(singular, direct, ~singular & ~direct, wan_s)


def _relay(
    ev: Evaluator, design: Design, p: WorkloadProfile, routes: _Routes, chain: _Chain
) -> _Relay:
    """RLD: relayed requests hold a slot until MD has their KV, singular ones for their
    output; on P's own instances (shared mode) each slot-second costs P 1/b of an
    instance-second."""
    shared = design.rld_mode is RldMode.SHARED
    pool = design.prefill if shared else design.relay
    if not ev.is_pdd(design) or pool is None:
        return _Relay()
    relayed, singular = routes.relayed, routes.singular
    b_rld, rld_step, _ = ev.decode_batch(pool.chip, pool.shape, drc=False)
    occupancy = np.where(relayed, routes.wan_s, 0.0) + np.where(
        singular, p.output_tokens * rld_step, 0.0
    )
    held = relayed | singular
    rld_rate = p.rate_rps * float(held.mean())
    busy = occupancy[held]
    slots = pool.instances * b_rld
    rld_rho = p.rate_rps * float(occupancy.mean()) / slots if slots else math.inf
    share = float(held.mean())
    cap = slots / float(busy.mean()) / share if busy.size and share > 0 else math.inf
    where = "on P's instances" if shared else f"batch {b_rld}"
    chain.stages.append(StageView(RELAY, rld_rho, cap, f"{where}, {share:.1%} of requests"))
    if b_rld == 0:
        chain.fail(
            Constraint.RELAY_FIT,
            f"{RELAY}: not one sequence fits on {pool.chip} at {pool.shape.label()}",
        )
    elif rld_rho >= MAX_UTILISATION:
        chain.fail(RELAY, f"{RELAY}: RLD would be {rld_rho:.0%} busy")
    wait = gg_wait(slots, rld_rate, busy, p.arrival_cv2) if busy.size and slots else Wait(0.0, 0.0)
    p_busy = float(occupancy.mean()) / b_rld if shared and b_rld else 0.0
    return _Relay(rld_step, wait, p_busy)


def _prefill(
    ev: Evaluator, design: Design, p: WorkloadProfile, relay: _Relay, chain: _Chain
) -> tuple[FloatArray, Wait]:
    """P: each request's prefill (its latency) and P's queue, whose servers are also busy
    with the relay's decode steps when RLD shares P's instances."""
    pool = design.prefill
    service = ev.prefill_service(pool.chip, pool.shape)
    occupied = ev.prefill_occupancy(pool.chip, pool.shape)
    p_work = float(occupied.mean()) + relay.p_busy_per_request
    p_rho = p.rate_rps * p_work / max(pool.instances, 1)
    detail = f"mean prefill {float(service.mean()):.2f} s"
    if ev.is_pdd(design) and design.rld_mode is RldMode.SHARED:
        detail += f" + {relay.p_busy_per_request:.2f} s of relay decode"
    chain.stages.append(StageView(PREFILL, p_rho, pool.instances / p_work, detail))
    if p_rho >= MAX_UTILISATION:
        chain.fail(PREFILL, f"{PREFILL}: P would be {p_rho:.0%} busy")
    work = occupied + relay.p_busy_per_request
    return service, gg_wait(pool.instances, p.rate_rps, work, p.arrival_cv2)


def _decode(
    ev: Evaluator, design: Design, p: WorkloadProfile, routes: _Routes, chain: _Chain
) -> tuple[int, float, float, Wait]:
    """MD (or same-dc D): decode slots of the batch its KV and TPOT allow; (batch, step,
    utilisation, slot wait)."""
    dec = design.decode
    pdd = ev.is_pdd(design)
    b_md, step_md, md_limit = ev.decode_batch(dec.chip, dec.shape, drc=pdd and ev.config.drc)
    to_md = routes.direct | routes.relayed
    md_rate = p.rate_rps * float(to_md.mean())
    md_service = p.output_tokens[to_md] * step_md if b_md else np.array([math.inf])
    md_slots = dec.instances * b_md
    md_rho = md_rate * float(md_service.mean()) / md_slots if md_slots else math.inf
    md_name = DECODE_TPOT if md_limit == DECODE_TPOT else DECODE_KV
    md_capacity = md_slots / float(md_service.mean()) / max(float(to_md.mean()), 1e-9)
    chain.stages.append(
        StageView(md_name, md_rho, md_capacity, f"batch {b_md} at {step_md * 1e3:.1f} ms/step")
    )
    if b_md == 0:
        chain.fail(
            Constraint.DECODE_FIT, f"{md_name}: not one sequence fits or meets TPOT on {dec.chip}"
        )
    elif md_rho >= MAX_UTILISATION:
        chain.fail(md_name, f"{md_name}: MD would be {md_rho:.0%} busy")
    md_wait = gg_wait(md_slots, md_rate, md_service, p.arrival_cv2) if md_slots else Wait(1, 1e9)
    return b_md, step_md, md_rho, md_wait


def _tpot(ev: Evaluator, dec: PoolChoice, rho: float, batch: int) -> dict[str, float]:
    """TPOT of a decode pool at ``rho`` of its ``batch`` slots (``tpot_at``)."""
    if batch <= 0 or not math.isfinite(rho):
        return {"p50": math.inf, "p90": math.inf, "p99": math.inf}
    return tpot_at(
        max(1.0, min(rho, 1.0) * batch),
        lambda b: ev.step(dec.chip, dec.shape, min(batch, b)),
    )
