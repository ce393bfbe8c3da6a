"""Sentences an operator can read: why each pool has its size, what binds, why it is infeasible.

Every sentence is computed from the same analytic model and simulator figures the plan reports,
including a counterfactual (one instance fewer, or the next tp down) so "why this size" has an
answer in numbers, not adjectives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pdd_core import perf
from pdd_core.planner.capacity import (
    DECODE_KV,
    DECODE_TPOT,
    TTFT_TAIL,
    Constraint,
    Evaluation,
    Evaluator,
)
from pdd_core.planner.design import COLOCATED, FAMILIES, FAMILY_NAMES, PDD, Design, PoolChoice
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.search import SearchResult
from pdd_core.planner.stages import evaluate
from pdd_core.planner.verify import Verification
from pdd_core.specs import LinkKind, Role
from pdd_core.units import BCR_UNIT, bcr_figure


def _fewer(ev: Evaluator, design: Design, pool: PoolChoice) -> str:
    if pool.instances <= 1:
        return "it is the smallest count there is"
    fewer = evaluate(ev, design.with_instances(pool.role, pool.instances - 1))
    if fewer.meets_sla:
        return (
            f"{pool.instances - 1} would meet the analytic model but the simulator needed "
            f"{pool.instances}"
        )
    return f"{pool.instances - 1} would break it ({fewer.violations[0]})"


def pool_reason(
    ev: Evaluator, design: Design, pool: PoolChoice, analytic: Evaluation, simulated: Verification
) -> str:
    """One sentence per pool: its load, what bounds it, and what one fewer would do."""
    # The simulator counts a colocated design's instances (both phases) under its policy.
    key = COLOCATED if design.policy == COLOCATED else str(pool.role)
    busy = simulated.summary.utilisation.get(key)
    load = f"{busy:.0%} busy" if busy is not None and math.isfinite(busy) else "busy not measured"
    head = (
        f"{pool.role} {pool.instances} x {pool.chip} {pool.shape.label()} in {pool.site}: "
        f"{load} in the simulator"
    )
    if pool.role is Role.PREFILL:
        miss = np.percentile(ev.profile.miss_tokens, 99)
        hit = np.percentile(ev.profile.hit_tokens, 50)
        alone = perf.prefill_time(ev.model, ev.chips[pool.chip], int(miss), int(hit), pool.shape)
        return (
            f"{head}; sized by the TTFT tail and prefill compute: the P99 miss "
            f"({int(miss):,} tokens) alone takes {alone.seconds:.2f} s at {pool.shape.label()}; "
            f"{_fewer(ev, design, pool)}."
        )
    if pool.role is Role.RELAY_DECODE:
        shares = analytic.shares
        return (
            f"{head}; RLD only masks latency, so it is sized for the relay share "
            f"({shares.get('P-RLD-MD', 0):.1%} relayed, {shares.get('P-RLD', 0):.1%} singular "
            f"finished on RLD) at the smallest tp that holds the model and a request; "
            f"{_fewer(ev, design, pool)}."
        )
    b, step, limit = ev.decode_batch(pool.chip, pool.shape, drc=design.policy == "pdd")
    bound = "the engine's max batch"
    if limit == DECODE_KV:
        bound = "its KV capacity"
    elif limit == DECODE_TPOT:
        bound = "the TPOT target"
    return (
        f"{head}; each instance decodes a batch of {b} ({step * 1e3:.1f} ms/step at the mean "
        f"context), bounded by {bound}; {_fewer(ev, design, pool)}."
    )


def binding_sentence(analytic: Evaluation) -> str:
    """Which constraint binds, in the vocabulary of DOMAIN.md section 6."""
    stages = ", ".join(f"{s.name} {s.utilisation:.0%}" for s in analytic.stages)
    if analytic.binding == TTFT_TAIL:
        return (
            f"binding: {TTFT_TAIL} - no stage is near saturation ({stages}); pools are as large "
            "as the SLA's TTFT percentiles need, not as throughput needs."
        )
    return f"binding: {analytic.binding} (stage utilisation: {stages})."


def infeasible_problems(
    ev: Evaluator, found: SearchResult, skeletons: list[Design]
) -> tuple[list[str], list[str]]:
    """What cannot be met and what would fix it, from the fastest design tried of any family
    (PDD's when it has a placement): the TTFT floor, the WAN, a decode chip, the chip budget;
    "no PDD placement" only when nothing else binds."""
    problems: list[str] = []
    fixes: list[str] = []
    pdd = [d for d in skeletons if d.policy == PDD]
    pool = pdd or skeletons
    if pool:
        fastest = min(
            pool, key=lambda d: float(ev.prefill_service(d.prefill.chip, d.prefill.shape).mean())
        )
        _floor_problem(ev, fastest, problems, fixes)
        for violation in evaluate(ev, fastest).violations:
            if violation.kind is Constraint.WAN and fastest.policy == PDD:
                problems.append(f"{violation}: the WAN line cannot carry the miss KV.")
                fixes.append("add WAN bandwidth, or raise the hit rate (larger prefix caches)")
            elif violation.kind is Constraint.DECODE_FIT:
                problems.append(f"{violation}.")
                fixes.append(
                    "raise the TPOT target or give decode higher-bandwidth chips or a larger tp"
                )
            elif violation.kind is Constraint.RELAY_FIT:
                problems.append(f"{violation}.")
                fixes.append("allow RLD on a chip with more memory")
    budget = chip_budget_problem(found.rejected)
    if not problems and budget:
        problems.append(budget)
        fixes.append("raise the chip limits in [planner] (max_chips) or add candidate chips")
    if not problems and not pdd:
        problems.append(
            "No PDD placement: P and RLD need a site with an RDMA fabric and MD another site "
            "joined to it by a WAN link, each with candidate chips for those roles; no "
            "single-site design met the SLA either."
        )
        fixes.append("add a [[planner.candidates]] entry per role and the links between the sites")
    if not problems:
        problems.extend(found.rejected[:3] or ["no design met the SLA"])
        fixes.append("relax the SLA or add candidate chips")
    return problems, fixes


def _floor_problem(ev: Evaluator, fastest: Design, problems: list[str], fixes: list[str]) -> None:
    """The TTFT floor (every queue empty) of the fastest P, when it already misses the SLA."""
    sla = ev.sla
    service = evaluate(ev, fastest).ttft_service
    chip, tp = fastest.prefill.chip, fastest.prefill.shape
    if service["p90"] <= sla.ttft_p90_s and service["p99"] <= sla.ttft_p99_s:
        return
    which, target, got = (
        ("P99", sla.ttft_p99_s, service["p99"])
        if service["p99"] > sla.ttft_p99_s
        else ("P90", sla.ttft_p90_s, service["p90"])
    )
    q = 99 if which == "P99" else 90
    miss = int(np.percentile(ev.profile.miss_tokens, q))
    alone = perf.prefill_time(ev.model, ev.chips[chip], miss, 0, tp).seconds
    problems.append(
        f"TTFT {which} {target:g} s cannot be met: with every queue empty the {which} TTFT is "
        f"{got:.2f} s; prefill of the {which} miss ({miss:,} tokens) alone takes {alone:.2f} s "
        f"on {chip} at {tp.label()}, the fastest P option available."
    )
    fixes.append("raise the TTFT target or add faster P chips (or more chips for a larger shape)")


def chip_budget_problem(rejected: Sequence[str]) -> str:
    """The chip budget as the binding limit, from the sizing's rejections (the fewest chips
    any design that meets the analytic SLA needs beyond a limit), or ""."""
    limited = [r for r in rejected if "the limit is" in r]
    if not limited:
        return ""
    return "the chip budget binds: every design that meets the SLA needs more chips than " + (
        f"allowed ({limited[0]})"
    )


def no_pdd_reason(
    ev: Evaluator, inputs: PlannerInputs, found: SearchResult, checked: Sequence[Verification]
) -> str:
    """Why a plan has no PDD design, naming what binds: no placement (one site or no WAN
    link), the chip budget, the TTFT floor or the WAN in the analytic search, or the
    simulator's misses within PDD's simulation budget."""
    if not any(link.kind is LinkKind.WAN for link in inputs.links):
        return "the inventory has no WAN link, so there is no cross-datacenter placement"
    runs = [v for v in checked if v.design.family == PDD]
    if not found.front(PDD) and not runs:
        pdd_rejected = [r for r in found.rejected if r.startswith(f"{PDD}:")]
        if not pdd_rejected:
            return (
                "no two sites joined by a WAN link offer chips for P (with RDMA) and MD, so "
                "there is no cross-datacenter placement"
            )
        budget = chip_budget_problem(pdd_rejected)
        return budget or f"no PDD design meets the SLA in the analytic model ({pdd_rejected[0]})"
    if not runs:
        return "no PDD design was simulated"
    cheapest = min(runs, key=lambda v: v.design.cost(ev.chips))
    s = cheapest.summary
    return (
        f"no PDD design met the SLA within its {len(runs)} simulations; the cheapest tried, "
        f"{cheapest.design.label()} (${cheapest.design.cost(ev.chips):.1f}/h), measured TTFT "
        f"P90 {s.ttft_p90:.2f} s / P99 {s.ttft_p99:.2f} s and TPOT P90 {s.tpot_p90 * 1e3:.0f} "
        f"ms: {cheapest.miss_text()}"
    )


def role_order(role: Role) -> int:
    return {Role.PREFILL: 0, Role.RELAY_DECODE: 1, Role.MAIN_DECODE: 2}[role]


def model_sentence(ev: Evaluator, chip_ids: list[str]) -> str:
    """The model the plan's figures come from, as configured (read, not assumed)."""
    config = ev.config
    if ev.wan is None:
        drc = "the inventory has no WAN line: every design hands KV over its site's fabric"
    elif config.drc:
        drc = (
            f"MD keeps a decode-side radix cache ({config.drc_fraction:.0%} of its KV), so only "
            "the KV it lacks (the miss) crosses the WAN in a PDD design"
        )
    else:
        drc = (
            "MD has no decode-side radix cache ([engine] drc = false), so a PDD design ships "
            "each request's whole prompt KV over the WAN"
        )
    chips = ", ".join(
        f"{c.id} eta_c {c.compute_efficiency:.3g} / eta_m {c.memory_efficiency:.3g}, "
        f"{c.scaleup_domain}-chip scale-up domain"
        for c in (ev.chips[i] for i in sorted(chip_ids) if i in ev.chips)
    )
    return (
        f"roofline passes (perf): TP inside one scale-up domain with measured all-reduce costs, "
        f"PP across domains, expert all-to-all overlapped; {drc}; prefill chunks of "
        f"{config.prefill_chunk_tokens:,} tokens, at most {config.max_batch} sequences per "
        f"decode batch; chips: {chips}."
    )


def arrivals_sentence(inputs: PlannerInputs) -> str:
    """Which arrival model the plan's simulations ran (``SimConfig.closed_loop``) and why."""
    generator = inputs.workload.generator if inputs.workload is not None else None
    if not inputs.config.closed_loop:
        source = "the recorded trace's" if generator is None else "the generated"
        return (
            f"arrivals open loop: every request at {source} arrival time, answered or not "
            "([engine] closed_loop = false, the default for a trace such as Mooncake's or "
            "Azure's); capacity is the offered rate at the highest load that meets the SLA"
        )
    if generator is not None:
        think = (
            f"the generator's tool/think time (exponential, mean {generator.turn_gap_s:g} s, "
            "[workload.generator] turn_gap_s)"
        )
    else:
        think = "the trace's gap between the two turns' arrivals, taken as tool/think time"
    return (
        "arrivals closed loop: a session's next turn arrives after its previous answer plus "
        f"{think} (the default for generated agentic sessions; [engine] closed_loop = false "
        "replays open loop); capacity is the rate the design achieved at the highest load "
        "that meets the SLA"
    )


def recommended_sentence(
    recommend: Sequence[str], chosen: Verification, cheapest: Verification, ev: Evaluator
) -> str:
    """What the recommendation was chosen among, when the deployment runs fewer families than
    the search compares (``PlannerSettings.recommend``); empty when it runs them all."""
    if set(FAMILIES) <= set(recommend):
        return ""
    among = ", ".join(FAMILY_NAMES[f] for f in FAMILIES if f in recommend)
    other = cheapest.design
    price = f"{other.label()} at ${other.cost(ev.chips):.1f}/h"
    if chosen.design.family not in recommend:
        return (f"No design of the families this deployment runs ({among}) met the SLA; the "
                f"cheapest that did, {price} ({FAMILY_NAMES[other.family]}), is not one it "
                "can enact.")  # fmt: skip
    if cheapest is not chosen and other.family not in recommend:
        return (f"Recommended among the families this deployment runs ({among}). A cheaper "
                f"design met the SLA, {price} ({FAMILY_NAMES[other.family]}), of a family it "
                "does not run: the verdict compares them.")  # fmt: skip
    return f"Recommended among the families this deployment runs ({among}), the cheapest of all."


def plan_reasons(
    inputs: PlannerInputs,
    *,
    design: Design,
    analytic: Evaluation,
    chosen: Verification,
    base: Verification | None,
    handoff: str,
    tuning: str,
    ev: Evaluator,
) -> dict[str, object]:
    """The plan's own reasons: what binds, each pool's, the routing and the same-dc
    comparison (the verdict and the sentences beside it are added by ``planner.run``)."""
    table = design.table
    s = chosen.summary
    if design.policy != PDD:
        routing = [
            f"{design.policy}: no cross-site routing; every request is prefilled and decoded in "
            f"{design.prefill.site}."
        ]
    else:
        routing = [
            f"transfer budget {table.transfer_budget_s:g} s: a request whose predicted WAN "
            f"transfer of the KV MD lacks fits in it goes P-MD "
            f"({analytic.shares.get('P-MD', 0):.0%} predicted, "
            f"{s.pipeline_mix.get('P-MD', 0):.0%} simulated), the rest relay through RLD.",
            tuning,
            f"singular filter: input >= {table.singular_min_input_tokens:,} tokens, output < "
            f"{table.singular_max_output_tokens} and hit <= {table.singular_max_hit:.0%} finish "
            f"on RLD without crossing the line ({analytic.shares.get('P-RLD', 0):.1%} of "
            "requests).",
            handoff,
        ]
    if base is None:
        comparison = "no homogeneous same-dc design met the SLA within the limits."
    else:
        b = base.summary
        verdict = "beats" if s.bcr > b.bcr else "does not beat"
        comparison = (
            f"the plan's BCR {bcr_figure(s.bcr)} {BCR_UNIT} (simulated) {verdict} the "
            f"best homogeneous same-dc design's {bcr_figure(b.bcr)} ({base.design.label()}, "
            f"${b.cost_per_hour:.1f}/h vs ${s.cost_per_hour:.1f}/h)."
        )
    return {
        "binding": analytic.binding,
        "summary": binding_sentence(analytic),
        "pools": [pool_reason(ev, design, p, analytic, chosen) for p in design.pools],
        "routing": routing,
        "comparison": comparison,
    }
