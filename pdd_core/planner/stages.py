"""``evaluate_design``: the stage-by-stage arithmetic of ``capacity.py``'s model.

Split from the evaluator so each stage reads as its formula: routing shares first (singular
filter, then the transfer budget against the predicted WAN time), then P, WAN, RLD and MD,
then the TTFT distribution from the per-request paths plus the queue waits.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pdd_core import metrics
from pdd_core.planner.capacity import (
    DECODE_KV,
    DECODE_TPOT,
    MAX_UTILISATION,
    PREFILL,
    RELAY,
    TTFT_TAIL,
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
from pdd_core.planner.profile import FloatArray, WorkloadProfile
from pdd_core.routing import Pipeline
from pdd_core.specs import RldMode
from pdd_core.transfer import slow_start_extra_array


def _rdma_s(ev: Evaluator, tokens: FloatArray) -> FloatArray:
    if ev.rdma is None:
        return np.zeros_like(tokens)
    rate = ev.rdma.bytes_per_s
    result: FloatArray = tokens * ev.model.kv_bytes_per_token / rate + ev.rdma.rtt_ms / 1000.0
    return result


def evaluate_design(ev: Evaluator, design: Design, p: WorkloadProfile) -> Evaluation:
    """Stage throughputs, shares, waits and SLA verdict of ``design`` on ``p``."""
    if design.policy == COLOCATED:
        return evaluate_colocated(ev, design, p)
    table = design.table
    rate = p.rate_rps
    n = p.input_tokens.size
    pdd = ev.is_pdd(design)
    shared = pdd and design.rld_mode is RldMode.SHARED
    violations: list[Violation] = []
    stages: list[StageView] = []
    # A saturated stage (or one that cannot hold a sequence) has no steady state: no tail.
    saturated = False

    # Routing shares (DOMAIN.md section 6): singular, then P-MD within the budget, else relay.
    ratio = p.hit_ratio
    if pdd:
        singular = (
            (p.input_tokens >= table.singular_min_input_tokens)
            & (p.output_tokens < table.singular_max_output_tokens)
            & (ratio <= table.singular_max_hit)
        )
    else:
        singular = np.zeros(n, dtype=bool)
    # MD's radix cache (DRC) tracks P's hits, so only the miss crosses; without it, all of it.
    shipped = p.miss_tokens if ev.config.drc else p.input_tokens
    wan_bytes = np.where(singular, 0.0, shipped * ev.model.kv_bytes_per_token)
    wan_rho = 0.0
    wan_s = np.zeros(n)
    if pdd:
        if ev.wan is None:
            raise ValueError("links: a PDD design needs a WAN link between P's and MD's sites")
        line = ev.wan.bytes_per_s
        wan_rho = rate * float(wan_bytes.mean()) / line
        slow = 1.0 - min(wan_rho, 0.999)
        rtt = ev.wan.rtt_ms / 1000.0
        # Setup and TCP slow start as the simulated line charges them (``transfer``: the ramp
        # at the line rate, whatever the share), on top of the queueing-stretched bytes.
        ramp = slow_start_extra_array(wan_bytes, line, rtt, ev.config.wan_initial_window_bytes)
        wan_s = ev.config.wan_setup_ms / 1000.0 + wan_bytes / (line * slow) + ramp + rtt
        stages.append(
            StageView(
                WAN,
                wan_rho,
                line / float(wan_bytes.mean()) if wan_bytes.mean() > 0 else math.inf,
                f"{wan_rho * ev.wan.bandwidth_gbps:.1f} of {ev.wan.bandwidth_gbps:g} Gbps",
            )
        )
        if wan_rho >= MAX_UTILISATION:
            violations.append(Violation(WAN, f"{WAN}: the miss KV needs {wan_rho:.0%} of the line"))
            saturated = True
        direct = ~singular & (wan_s <= table.transfer_budget_s)
    else:
        direct = np.ones(n, dtype=bool)
    relayed = ~singular & ~direct

    # RLD: relayed requests hold a slot until MD has their KV, singular ones for their output.
    rld_step, rld_wait, rld_busy_per_request = 0.0, Wait(0.0, 0.0), 0.0
    relay_pool = design.relay if not shared else design.prefill
    if pdd and relay_pool is not None:
        rl = relay_pool
        b_rld, rld_step, _ = ev.decode_batch(rl.chip, rl.shape, drc=False)
        occupancy = np.where(relayed, wan_s, 0.0) + np.where(
            singular, p.output_tokens * rld_step, 0.0
        )
        rld_rate = rate * float((relayed | singular).mean())
        busy = occupancy[relayed | singular]
        slots = rl.instances * b_rld
        rld_rho = rate * float(occupancy.mean()) / slots if slots else math.inf
        share = float((relayed | singular).mean())
        cap = slots / float(busy.mean()) / share if busy.size and share > 0 else math.inf
        where = "on P's instances" if shared else f"batch {b_rld}"
        stages.append(StageView(RELAY, rld_rho, cap, f"{where}, {share:.1%} of requests"))
        if b_rld == 0:
            violations.append(
                Violation(
                    Constraint.RELAY_FIT,
                    f"{RELAY}: not one sequence fits on {rl.chip} at {rl.shape.label()}",
                )
            )
            saturated = True
        elif rld_rho >= MAX_UTILISATION:
            violations.append(Violation(RELAY, f"{RELAY}: RLD would be {rld_rho:.0%} busy"))
            saturated = True
        if busy.size and slots:
            rld_wait = gg_wait(slots, rld_rate, busy, p.arrival_cv2)
        # Time-shared on P: each relay slot-second costs P 1/b of an instance-second.
        if shared and b_rld:
            rld_busy_per_request = float(occupancy.mean()) / b_rld

    # P: prefill compute (plus the relay's decode steps when RLD shares P's instances).
    service = ev.prefill_service(design.prefill.chip, design.prefill.shape)
    occupied = ev.prefill_occupancy(design.prefill.chip, design.prefill.shape)
    p_servers = design.prefill.instances
    p_work = float(occupied.mean()) + rld_busy_per_request
    p_rho = rate * p_work / max(p_servers, 1)
    detail = f"mean prefill {float(service.mean()):.2f} s"
    if shared:
        detail += f" + {rld_busy_per_request:.2f} s of relay decode"
    stages.append(StageView(PREFILL, p_rho, p_servers / p_work, detail))
    if p_rho >= MAX_UTILISATION:
        violations.append(Violation(PREFILL, f"{PREFILL}: P would be {p_rho:.0%} busy"))
        saturated = True
    p_wait = gg_wait(p_servers, rate, occupied + rld_busy_per_request, p.arrival_cv2)

    # MD (or same-dc D): decode slots.
    dec = design.decode
    b_md, step_md, md_limit = ev.decode_batch(dec.chip, dec.shape, drc=pdd and ev.config.drc)
    to_md = direct | relayed
    md_rate = rate * float(to_md.mean())
    md_service = p.output_tokens[to_md] * step_md if b_md else np.array([math.inf])
    md_slots = dec.instances * b_md
    md_rho = md_rate * float(md_service.mean()) / md_slots if md_slots else math.inf
    md_name = DECODE_TPOT if md_limit == DECODE_TPOT else DECODE_KV
    md_capacity = md_slots / float(md_service.mean()) / max(float(to_md.mean()), 1e-9)
    stages.append(
        StageView(md_name, md_rho, md_capacity, f"batch {b_md} at {step_md * 1e3:.1f} ms/step")
    )
    if b_md == 0:
        violations.append(
            Violation(
                Constraint.DECODE_FIT,
                f"{md_name}: not one sequence fits or meets TPOT on {dec.chip}",
            )
        )
        saturated = True
    elif md_rho >= MAX_UTILISATION:
        violations.append(Violation(md_name, f"{md_name}: MD would be {md_rho:.0%} busy"))
        saturated = True
    md_wait = gg_wait(md_slots, md_rate, md_service, p.arrival_cv2) if md_slots else Wait(1, 1e9)

    # TTFT: the first token comes out of prefill (P-MD: MD's first step after the transfer; a
    # relayed request: RLD's first step, or none when RLD shares P's instance).
    first_md = step_md if math.isfinite(step_md) else 0.0
    if pdd:
        relay_path = service if shared else service + _rdma_s(ev, p.input_tokens) + rld_step
        base = np.where(direct, service + wan_s + first_md, relay_path)
    else:
        base = service + _rdma_s(ev, p.input_tokens) + first_md
    u0, e0 = ev.draws(0)
    u1, e1 = ev.draws(1)
    waits = p_wait.draw(u0, e0)
    second = np.where(direct, md_wait.draw(u1, e1), rld_wait.draw(u1, e1))
    ttft_samples = (base + waits + second).ravel()
    tpot = _tpot(ev, design.decode, md_rho, b_md)
    return verdict(
        ev,
        design,
        p,
        ttft_samples=ttft_samples,
        base=base,
        tpot=tpot,
        stages=stages,
        violations=violations,
        saturated=saturated,
        shares={
            str(Pipeline.P_MD if pdd else Pipeline.P_D): float(direct.mean()),
            str(Pipeline.P_RLD_MD): float(relayed.mean()),
            str(Pipeline.P_RLD): float(singular.mean()),
        },
    )


def verdict(
    ev: Evaluator,
    design: Design,
    p: WorkloadProfile,
    *,
    ttft_samples: FloatArray,
    base: FloatArray,
    tpot: dict[str, float],
    stages: list[StageView],
    violations: list[Violation],
    saturated: bool,
    shares: dict[str, float],
) -> Evaluation:
    """TTFT/TPOT percentiles against the SLA, goodput, cost, BCR and the binding stage."""
    sla, rate = ev.sla, p.rate_rps
    stable = not saturated
    if stable:
        ttft = metrics.percentiles(list(ttft_samples))
    else:
        ttft = {"p50": math.inf, "p90": math.inf, "p99": math.inf}
    if ttft["p90"] > sla.ttft_p90_s or ttft["p99"] > sla.ttft_p99_s:
        violations.append(
            Violation(
                TTFT_TAIL,
                f"{TTFT_TAIL}: P90 {ttft['p90']:.2f} s / P99 {ttft['p99']:.2f} s against "
                f"{sla.ttft_p90_s:g} / {sla.ttft_p99_s:g} s",
            )
        )
    if tpot["p90"] > sla.tpot_p90_s or tpot["p99"] > sla.tpot_p99_s:
        violations.append(
            Violation(Constraint.TPOT_TAIL, f"TPOT tail: P90 {tpot['p90'] * 1e3:.0f} ms")
        )
    good_share = float(np.mean(ttft_samples <= sla.ttft_p90_s)) if stable else 0.0
    goodput = rate * good_share if tpot["p90"] <= sla.tpot_p90_s else 0.0
    cost = design.cost(ev.chips)
    prices = ev.prices
    per_request = (
        p.miss_tokens * prices.miss_input_per_mtok
        + p.hit_tokens * prices.hit_input_per_mtok
        + p.output_tokens * prices.output_per_mtok
    ) / 1e6
    revenue = rate * 3600 * float(per_request.mean())
    # The busiest stage binds when it is loaded; a lightly loaded design that still needs its
    # size is held there by the TTFT tail (service times and queueing spikes, not throughput).
    busiest = max(stages, key=lambda s: s.utilisation)
    binding = busiest.name if busiest.utilisation >= 0.6 else TTFT_TAIL
    return Evaluation(
        meets_sla=not violations,
        stable=stable,
        ttft=ttft,
        ttft_service=metrics.percentiles(list(base)),
        tpot=tpot,
        goodput_rps=goodput,
        cost_per_hour=cost,
        bcr=goodput / cost if cost > 0 else math.nan,
        revenue_per_hour=revenue * (good_share if stable else 0.0),
        stages=tuple(stages),
        shares=shares,
        binding=binding,
        violations=tuple(violations),
    )


def _tpot(ev: Evaluator, dec: PoolChoice, rho: float, batch: int) -> dict[str, float]:
    """TPOT of a decode pool at ``rho`` of its ``batch`` slots (``tpot_at``)."""
    if batch <= 0 or not math.isfinite(rho):
        return {"p50": math.inf, "p90": math.inf, "p99": math.inf}
    return tpot_at(
        max(1.0, min(rho, 1.0) * batch),
        lambda b: ev.step(dec.chip, dec.shape, min(batch, b)),
    )


def tpot_at(mean_batch: float, step_s: Callable[[int], float]) -> dict[str, float]:
    """TPOT at the mean batch (P50) and at the mean plus 1.28 / 2.33 Poisson sigmas, from
    ``step_s(batch)``, the iteration time at a batch size."""
    result = {}
    for key, z in (("p50", 0.0), ("p90", 1.28), ("p99", 2.33)):
        result[key] = step_s(max(1, math.ceil(mean_batch + z * math.sqrt(mean_batch))))
    return result
