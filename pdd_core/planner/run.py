"""The planner's phases, so a caller can run them in one process or fan them out.

``prepare`` (profile + analytic search, deterministic, a second or two) -> ``first_round`` (the
designs to simulate first: the best few PDD designs and the best baseline) -> ``verify`` each
(one simulator run, the expensive part: the control plane runs these as a Celery group) ->
``finish`` (fix-up simulations within the budget, handoff thresholds, bathtub, reasons). A
Celery job re-runs ``prepare`` in its finishing task rather than shipping the search across
processes: it is deterministic, so both sides see the same ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pdd_core.planner.bathtub import bathtub
from pdd_core.planner.capacity import Evaluation, Evaluator
from pdd_core.planner.design import COLOCATED, PDD, SAME_DC, Design
from pdd_core.planner.improve import best_confirmed, confirmed, improve
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.profile import WorkloadProfile, profile_from_requests
from pdd_core.planner.reasons import (
    binding_sentence,
    infeasible_problems,
    model_sentence,
    pool_reason,
    role_order,
)
from pdd_core.planner.result import (
    Infeasible,
    Plan,
    PlanOutcome,
    PoolPlan,
    cost_table,
    predicted_from,
)
from pdd_core.planner.search import SearchResult, _placements, all_skeletons, search
from pdd_core.planner.tuning import evaluator_for, plan_routing
from pdd_core.planner.verdict import rld_mode_reason, verdict
from pdd_core.planner.verify import Verification, verify

Progress = Callable[[float, str], None]


@dataclass(frozen=True, slots=True)
class Prepared:
    """The profile, the evaluator and the ranked search, ready for verification."""

    profile: WorkloadProfile
    evaluator: Evaluator
    found: SearchResult


def _noop(_: float, __: str) -> None:
    return None


def prepare(inputs: PlannerInputs, progress: Progress | None = None) -> Prepared:
    """Profile the workload and search the design space with the analytic model."""
    report = progress or _noop
    report(0.0, "profiling the workload")
    profile = profile_from_requests(
        inputs.requests,
        block_size=inputs.config.block_size,
        cache_tokens=inputs.config.prefix_cache_tokens,
        max_samples=inputs.settings.samples,
        seed=inputs.seed,
    )
    evaluator = evaluator_for(inputs, profile)
    found = search(evaluator, inputs, lambda f: report(0.05 + 0.15 * f, "analytic search"))
    return Prepared(profile, evaluator, found)


def first_round(inputs: PlannerInputs, prepared: Prepared) -> list[Design]:
    """The best ``settings.verify`` PDD designs (distinct pools), the best homogeneous
    disaggregated and the best aggregated design."""
    picked: list[Design] = []
    pools_seen: set[str] = set()
    for scored in prepared.found.pdd:
        key = scored.design.label()
        if key in pools_seen:
            continue
        pools_seen.add(key)
        picked.append(scored.design)
        if len(picked) >= inputs.settings.verify:
            break
    for ranked in (prepared.found.baseline, prepared.found.colocated):
        if ranked:
            picked.append(ranked[0].design)
    return picked


def finish(
    inputs: PlannerInputs,
    prepared: Prepared,
    verifications: Sequence[Verification],
    progress: Progress | None = None,
) -> PlanOutcome:
    """Fix-ups within the simulation budget, then the plan (or why there is none).

    The recommended design is the cheapest the simulator confirmed among PDD, homogeneous
    disaggregated and aggregated designs; ``reasons["verdict"]`` says whether PDD pays and why.
    """
    report = progress or _noop
    ev, found = prepared.evaluator, prepared.found
    search_info: dict[str, Any] = {
        "designs_evaluated": found.evaluated,
        "feasible_pdd": len(found.pdd),
        "feasible_baseline": len(found.baseline),
        "feasible_colocated": len(found.colocated),
        "workload": {
            "requests": prepared.profile.requests,
            "rate_rps": prepared.profile.rate_rps,
            "arrival_cv2": prepared.profile.arrival_cv2,
            "mean_hit": prepared.profile.mean_hit,
            "token_hit": prepared.profile.token_hit,
        },
    }
    if not (found.pdd or found.baseline or found.colocated):
        problems, fixes = infeasible_problems(ev, found, all_skeletons(ev, inputs))
        return Infeasible(inputs.name, inputs.model.id, tuple(problems), tuple(fixes), search_info)
    checked = list(verifications)
    budgets = (
        (PDD, inputs.settings.max_simulations),
        (SAME_DC, inputs.settings.baseline_simulations),
        (COLOCATED, inputs.settings.baseline_simulations),
    )
    for policy, budget in budgets:
        improve(
            inputs,
            ranking=prepared.found.ranked(policy),
            chips=ev.chips,
            checked=checked,
            policy=policy,
            budget=budget,
            report=report,
        )
    search_info["simulations"] = [_simulation_row(v) for v in checked]
    best = {policy: best_confirmed(checked, policy) for policy, _ in budgets}
    confirmed_designs = [v for v in best.values() if v is not None]
    if not confirmed_designs:
        return _unconfirmed(inputs, checked, search_info)
    chosen = min(confirmed_designs, key=lambda v: (v.design.cost(ev.chips), -v.summary.bcr))
    report(0.85, "deriving handoff thresholds and the bathtub")
    routing = plan_routing(inputs, ev, chosen, confirmed)
    if routing.chosen is not chosen:
        chosen = best[PDD] = routing.chosen
    design, table = chosen.design, routing.table
    handoff_reason, tuning_reason = routing.handoff_reason, routing.tuning_reason
    analytic = ev.evaluate(design)
    pools = tuple(
        PoolPlan(
            site=p.site,
            chip=p.chip,
            role=str(p.role),
            instances=p.instances,
            tp=p.tp,
            pp=p.pp,
            dp=p.dp,
            ep=p.ep,
            cost_per_hour=p.cost(ev.chips),
            reason=pool_reason(ev, design, p, analytic, chosen),
        )
        for p in sorted(design.pools, key=lambda p: role_order(p.role))
    )
    base = best[SAME_DC]
    pdd_best = best[PDD]
    tub_design = pdd_best.design if pdd_best is not None else design
    tub_table = table if tub_design is design else tub_design.table
    curve = bathtub(
        ev,
        replace(tub_design, table=tub_table),
        inputs.settings.bathtub_points,
        inputs,
        homogeneous=base.design if base is not None and tub_design.policy == PDD else None,
    )
    report(0.95, "writing the plan")
    baseline_info: dict[str, object] = {"found": base is not None}
    cost_rows = cost_table(design, base.design if base else None, ev.chips)
    if base is not None:
        baseline_info.update(
            pools=[p.to_dict() for p in base.design.pools],
            predicted=predicted_from(base.summary),
        )
    reasons = _reasons(
        inputs,
        design=design,
        analytic=analytic,
        chosen=chosen,
        base=base,
        handoff=handoff_reason,
        tuning=tuning_reason,
        ev=ev,
    )
    reasons["verdict"] = verdict(
        ev,
        best,
        chosen,
        single_site=not _placements(inputs),
        checked=checked,
        aggregated_floor=min((s.evaluation.cost_per_hour for s in found.colocated), default=None),
    )
    reasons["rld_mode"] = rld_mode_reason(ev, found.pdd, design)
    reasons["model"] = model_sentence(ev, [c.chip for c in inputs.candidates])
    return Plan(
        name=inputs.name,
        model=inputs.model.id,
        pools=pools,
        routing_table=table,
        predicted=predicted_from(chosen.summary),
        analytic={
            "ttft": analytic.ttft,
            "tpot": analytic.tpot,
            "goodput_rps": analytic.goodput_rps,
            "stages": [
                {"name": s.name, "utilisation": s.utilisation, "capacity_rps": s.capacity_rps}
                for s in analytic.stages
            ],
            "shares": analytic.shares,
        },
        baseline=baseline_info,
        cost_table=tuple(cost_rows),
        bathtub=curve,
        reasons=reasons,
        search=search_info,
        policy=design.policy,
        rld_mode=str(design.rld_mode) if design.policy == PDD else None,
    )


def _simulation_row(v: Verification) -> dict[str, Any]:
    return {
        "design": v.design.label(),
        "policy": v.design.policy,
        "transfer_budget_s": v.design.table.transfer_budget_s,
        "sla_met": v.summary.sla_met,
        "rejected": v.summary.rejected,
        "bcr": v.summary.bcr,
        "cost_per_hour": v.summary.cost_per_hour,
        "ttft_p99": v.summary.ttft_p99,
        "cause": v.cause,
    }


def _unconfirmed(
    inputs: PlannerInputs, checked: Sequence[Verification], search_info: dict[str, Any]
) -> Infeasible:
    last = checked[-1]
    s = last.summary
    problems = [
        f"The analytic model found designs, but the simulator confirmed none within the "
        f"simulation budget; the last ({last.design.label()}) measured TTFT P90 "
        f"{s.ttft_p90:.2f} s / P99 {s.ttft_p99:.2f} s, TPOT P99 {s.tpot_p99 * 1e3:.0f} ms, "
        f"{s.rejected} rejected, its misses dominated by {last.cause}."
    ]
    fixes = ["raise the chip limits, relax the SLA, or raise max_simulations in [planner]"]
    return Infeasible(inputs.name, inputs.model.id, tuple(problems), tuple(fixes), search_info)


def _reasons(
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
            f"the plan's BCR {s.bcr * 1e3:.2f} (x1000, req/s per $/h, simulated) {verdict} the "
            f"best homogeneous same-dc design's {b.bcr * 1e3:.2f} ({base.design.label()}, "
            f"${b.cost_per_hour:.1f}/h vs ${s.cost_per_hour:.1f}/h)."
        )
    return {
        "binding": analytic.binding,
        "summary": binding_sentence(analytic),
        "pools": [pool_reason(ev, design, p, analytic, chosen) for p in design.pools],
        "routing": routing,
        "comparison": comparison,
    }


def make_plan(inputs: PlannerInputs, progress: Progress | None = None) -> PlanOutcome:
    """Plan in this process: prepare, verify the first round, finish."""
    report = progress or _noop
    prepared = prepare(inputs, report)
    found = prepared.found
    if not (found.pdd or found.baseline or found.colocated):
        return finish(inputs, prepared, [], report)
    checked = []
    designs = first_round(inputs, prepared)
    for index, design in enumerate(designs):
        report(0.2 + 0.5 * index / len(designs), f"simulating {design.label()}")
        checked.append(verify(inputs, design))
    outcome = finish(inputs, prepared, checked, report)
    report(1.0, "done")
    return outcome
