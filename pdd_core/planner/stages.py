"""``evaluate_design``: the stage-by-stage arithmetic of ``capacity.py``'s model.

Split from the evaluator so each stage reads as its formula: routing shares first (singular
filter, then the transfer budget against the predicted WAN time), then P, WAN, RLD and MD,
then the TTFT distribution from the per-request paths plus the queue waits.
"""

from __future__ import annotations

import math

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
    Evaluation,
    Evaluator,
    StageView,
    Wait,
    gg_wait,
)
from pdd_core.planner.design import Design
from pdd_core.planner.profile import FloatArray, WorkloadProfile
from pdd_core.routing import Pipeline


def _rdma_s(ev: Evaluator, tokens: FloatArray) -> FloatArray:
    if ev.rdma is None:
        return np.zeros_like(tokens)
    rate = ev.rdma.bytes_per_s
    result: FloatArray = tokens * ev.model.kv_bytes_per_token / rate + ev.rdma.rtt_ms / 1000.0
    return result


def evaluate_design(ev: Evaluator, design: Design, p: WorkloadProfile) -> Evaluation:
    """Stage throughputs, shares, waits and SLA verdict of ``design`` on ``p``."""
    sla, table = ev.sla, design.table
    rate = p.rate_rps
    n = p.input_tokens.size
    pdd = ev.is_pdd(design)
    violations: list[str] = []
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
    wan_bytes = np.where(singular, 0.0, p.miss_tokens * ev.model.kv_bytes_per_token)
    wan_rho = 0.0
    wan_s = np.zeros(n)
    if pdd:
        if ev.wan is None:
            raise ValueError("links: a PDD design needs a WAN link between P's and MD's sites")
        line = ev.wan.bytes_per_s
        wan_rho = rate * float(wan_bytes.mean()) / line
        slow = 1.0 - min(wan_rho, 0.999)
        wan_s = wan_bytes / (line * slow) + ev.wan.rtt_ms / 1000.0
        stages.append(
            StageView(
                WAN,
                wan_rho,
                line / float(wan_bytes.mean()) if wan_bytes.mean() > 0 else math.inf,
                f"{wan_rho * ev.wan.bandwidth_gbps:.1f} of {ev.wan.bandwidth_gbps:g} Gbps",
            )
        )
        if wan_rho >= MAX_UTILISATION:
            violations.append(f"{WAN}: the miss KV needs {wan_rho:.0%} of the line")
            saturated = True
        direct = ~singular & (wan_s <= table.transfer_budget_s)
    else:
        direct = np.ones(n, dtype=bool)
    relayed = ~singular & ~direct

    # P: prefill compute.
    service = ev.prefill_service(design.prefill.chip, design.prefill.shape)
    p_servers = design.prefill.instances
    p_rho = rate * float(service.mean()) / max(p_servers, 1)
    stages.append(
        StageView(
            PREFILL,
            p_rho,
            p_servers / float(service.mean()),
            f"mean prefill {float(service.mean()):.2f} s",
        )
    )
    if p_rho >= MAX_UTILISATION:
        violations.append(f"{PREFILL}: P would be {p_rho:.0%} busy")
        saturated = True
    p_wait = gg_wait(p_servers, rate, service, p.arrival_cv2)

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
        violations.append(f"{md_name}: not one sequence fits or meets TPOT on {dec.chip}")
        saturated = True
    elif md_rho >= MAX_UTILISATION:
        violations.append(f"{md_name}: MD would be {md_rho:.0%} busy")
        saturated = True
    md_wait = gg_wait(md_slots, md_rate, md_service, p.arrival_cv2) if md_slots else Wait(1, 1e9)

    # RLD: relay slots (until MD has the KV) and singular requests (whole output).
    rld_step, rld_wait = 0.0, Wait(0.0, 0.0)
    if pdd and design.relay is not None:
        rl = design.relay
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
        stages.append(StageView(RELAY, rld_rho, cap, f"batch {b_rld}, {share:.1%} of requests"))
        if b_rld == 0:
            violations.append(f"{RELAY}: not one sequence fits on {rl.chip} at {rl.shape.label()}")
            saturated = True
        elif rld_rho >= MAX_UTILISATION:
            violations.append(f"{RELAY}: RLD would be {rld_rho:.0%} busy")
            saturated = True
        if busy.size and slots:
            rld_wait = gg_wait(slots, rld_rate, busy, p.arrival_cv2)

    # TTFT: each request's path plus the waits of the queues it crosses.
    first_md = step_md if math.isfinite(step_md) else 0.0
    if pdd:
        base = np.where(
            direct,
            service + wan_s + first_md,
            service + _rdma_s(ev, p.input_tokens) + rld_step,
        )
    else:
        base = service + _rdma_s(ev, p.input_tokens) + first_md
    u0, e0 = ev.draws(0)
    u1, e1 = ev.draws(1)
    waits = p_wait.draw(u0, e0)
    second = np.where(direct, md_wait.draw(u1, e1), rld_wait.draw(u1, e1))
    ttft_samples = (base + waits + second).ravel()
    stable = not saturated
    if stable:
        ttft = metrics.percentiles(list(ttft_samples))
    else:
        ttft = {"p50": math.inf, "p90": math.inf, "p99": math.inf}
    tpot = _tpot(ev, design, md_rho, b_md)
    if ttft["p90"] > sla.ttft_p90_s or ttft["p99"] > sla.ttft_p99_s:
        violations.append(
            f"{TTFT_TAIL}: P90 {ttft['p90']:.2f} s / P99 {ttft['p99']:.2f} s against "
            f"{sla.ttft_p90_s:g} / {sla.ttft_p99_s:g} s"
        )
    if tpot["p90"] > sla.tpot_p90_s or tpot["p99"] > sla.tpot_p99_s:
        violations.append(f"{DECODE_TPOT}: TPOT P90 {tpot['p90'] * 1e3:.0f} ms")
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
        shares={
            str(Pipeline.P_MD if pdd else Pipeline.P_D): float(direct.mean()),
            str(Pipeline.P_RLD_MD): float(relayed.mean()),
            str(Pipeline.P_RLD): float(singular.mean()),
        },
        binding=binding,
        violations=tuple(violations),
    )


def _tpot(ev: Evaluator, design: Design, rho: float, batch: int) -> dict[str, float]:
    """TPOT at the mean batch (P50) and at the mean plus 1.28 / 2.33 Poisson sigmas."""
    if batch <= 0 or not math.isfinite(rho):
        return {"p50": math.inf, "p90": math.inf, "p99": math.inf}
    mean_batch = max(1.0, min(rho, 1.0) * batch)
    dec = design.decode
    result = {}
    for key, z in (("p50", 0.0), ("p90", 1.28), ("p99", 2.33)):
        b = min(batch, max(1, math.ceil(mean_batch + z * math.sqrt(mean_batch))))
        result[key] = ev.step(dec.chip, dec.shape, b)
    return result
