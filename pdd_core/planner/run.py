"""The planner's phases, so a caller can run them in one process or fan them out.

``prepare`` (profile + analytic search, deterministic, a second or two) -> ``first_round`` (the
designs to simulate first: the best few PDD designs and the best baseline) -> ``verify`` each
(one simulator run, the expensive part: the control plane runs these as a Celery group) ->
``finish`` (fix-up simulations within the budget, handoff thresholds, bathtub, reasons). A
Celery job re-runs ``prepare`` in its finishing task rather than shipping the search across
processes: it is deterministic, so both sides see the same ranking.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pdd_core.planner.bathtub import Bathtub, bathtub
from pdd_core.planner.capacity import Evaluation, Evaluator
from pdd_core.planner.design import FAMILIES, PDD, SAME_DC, Design
from pdd_core.planner.evidence import measure_families
from pdd_core.planner.improve import best_confirmed, confirmed, improve, propose
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.profile import WorkloadProfile, profile_from_requests
from pdd_core.planner.reasons import (
    arrivals_sentence,
    infeasible_problems,
    model_sentence,
    no_pdd_reason,
    plan_reasons,
    pool_reason,
    recommended_sentence,
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
from pdd_core.planner.search import SearchResult, search
from pdd_core.planner.skeletons import all_skeletons, placements
from pdd_core.planner.stages import evaluate
from pdd_core.planner.tuning import PlannedRouting, evaluator_for, plan_routing
from pdd_core.planner.verdict import rld_mode_reason, verdict
from pdd_core.planner.verify import Verification, verify
from pdd_core.routing import RoutingTable
from pdd_core.sim.measure import MeasuredCapacity

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
    """Each family's first designs (``improve.propose`` before any simulation: the cheapest
    member of its front the analytic model accepts), ``settings.verify`` per family."""
    picked: list[Design] = []
    chips = prepared.evaluator.chips
    for family in FAMILIES:
        front = prepared.found.front(family)
        first = propose(inputs, front, [], family, chips)
        if first is None:
            continue
        picked.append(first)
        extra = [m.design for m in front if m.evaluation.meets_sla and m.design != first]
        picked.extend(extra[: inputs.settings.verify - 1])
    return picked


def finish(
    inputs: PlannerInputs,
    prepared: Prepared,
    verifications: Sequence[Verification],
    progress: Progress | None = None,
    timings: dict[str, float] | None = None,
) -> PlanOutcome:
    """The rest of each family's search within its budget, then the plan (or why there is none).

    The recommended design is the cheapest the simulator confirmed among every family;
    ``reasons["verdict"]`` says whether PDD pays within its stated tolerance, from each family's
    best design measured over independent workloads (``planner.evidence``). ``timings``, when
    given, receives ``capacity_cpu_s``: the CPU seconds of that measurement (kept out of the
    plan, which is deterministic).
    """
    report = progress or _noop
    ev, found = prepared.evaluator, prepared.found
    search_info: dict[str, Any] = {
        "designs_evaluated": found.evaluated,
        "feasible_pdd": len(found.pdd),
        "feasible_baseline": len(found.baseline),
        "feasible_hetero": len(found.hetero),
        "feasible_colocated": len(found.colocated),
        "front": {f: len(found.front(f)) for f in FAMILIES},
        "workload": {
            "requests": prepared.profile.requests,
            "rate_rps": prepared.profile.rate_rps,
            "arrival_cv2": prepared.profile.arrival_cv2,
            "mean_hit": prepared.profile.mean_hit,
            "token_hit": prepared.profile.token_hit,
            # what the live workload's drift is judged against (planner.drift)
            "mean_input_tokens": float(prepared.profile.input_tokens.mean()),
            "mean_output_tokens": float(prepared.profile.output_tokens.mean()),
        },
    }
    if not found.any_feasible():
        problems, fixes = infeasible_problems(ev, found, all_skeletons(ev, inputs))
        return Infeasible(inputs.name, inputs.model.id, tuple(problems), tuple(fixes), search_info)
    checked = list(verifications)
    for family in FAMILIES:
        improve(
            inputs,
            front=found.front(family),
            chips=ev.chips,
            checked=checked,
            family=family,
            budget=inputs.settings.simulations,
            report=report,
        )
    search_info["simulations"] = [_simulation_row(v) for v in checked]
    best = {family: best_confirmed(checked, family) for family in FAMILIES}
    confirmed_designs = [v for v in best.values() if v is not None]
    if not confirmed_designs:
        return _unconfirmed(inputs, checked, search_info)
    allowed = [v for f, v in best.items() if v is not None and f in inputs.settings.recommend]
    chosen = _cheapest(allowed or confirmed_designs, ev)
    report(0.8, "deriving handoff thresholds")
    routing = plan_routing(inputs, ev, chosen, confirmed)
    if routing.chosen is not chosen:
        chosen = best[PDD] = routing.chosen
    started = time.process_time()
    report(0.85, "measuring each family's capacity over independent workloads")
    measured = measure_families(inputs, best)
    if timings is not None:
        timings["capacity_cpu_s"] = time.process_time() - started
    return _plan(inputs, prepared, chosen, best, checked, routing, measured, search_info, report)


def _plan(  # noqa: PLR0917 - one call site, each argument a distinct product of finish
    inputs: PlannerInputs,
    prepared: Prepared,
    chosen: Verification,
    best: dict[str, Verification | None],
    checked: list[Verification],
    routing: PlannedRouting,
    measured: dict[str, MeasuredCapacity],
    search_info: dict[str, Any],
    report: Progress,
) -> Plan:
    """The plan of ``chosen``: pools, reasons, verdict, bathtub."""
    ev, found = prepared.evaluator, prepared.found
    design, table = chosen.design, routing.table
    analytic = evaluate(ev, design)
    pools = _pools(ev, chosen, analytic)
    base = best[SAME_DC]
    curve = _bathtub(inputs, ev, chosen, table, best)
    report(0.95, "writing the plan")
    baseline_info: dict[str, object] = {"found": base is not None}
    cost_rows = cost_table(design, base.design if base else None, ev.chips)
    if base is not None:
        baseline_info.update(
            pools=[p.to_dict() for p in base.design.pools],
            predicted=predicted_from(base.summary),
        )
    reasons = plan_reasons(
        inputs,
        design=design,
        analytic=analytic,
        chosen=chosen,
        base=base,
        handoff=routing.handoff_reason,
        tuning=routing.tuning_reason,
        ev=ev,
    )
    single_site = not placements(inputs)
    reasons["verdict"] = verdict(
        ev,
        best,
        chosen,
        single_site=single_site,
        checked=checked,
        aggregated_floor=min((s.evaluation.cost_per_hour for s in found.colocated), default=None),
        measured=measured,
        no_pdd=no_pdd_reason(ev, inputs, found, checked) if best[PDD] is None else "",
    )
    reasons["rld_mode"] = rld_mode_reason(ev, found.pdd, design)
    cheapest = _cheapest([v for v in best.values() if v is not None], ev)
    reasons["recommended_among"] = recommended_sentence(
        inputs.settings.recommend, chosen, cheapest, ev
    )
    reasons["model"] = model_sentence(ev, [c.chip for c in inputs.candidates])
    reasons["arrivals"] = arrivals_sentence(inputs)
    return Plan(
        name=inputs.name,
        model=inputs.model.id,
        pools=pools,
        routing_table=table,
        predicted=predicted_from(chosen.summary),
        analytic=_analytic_dict(analytic),
        baseline=baseline_info,
        cost_table=tuple(cost_rows),
        bathtub=curve,
        reasons=reasons,
        search=search_info,
        policy=design.policy,
        rld_mode=str(design.rld_mode) if design.policy == PDD else None,
    )


def _pools(ev: Evaluator, chosen: Verification, analytic: Evaluation) -> tuple[PoolPlan, ...]:
    """The chosen design's pools in role order, each priced and with its reason."""
    design = chosen.design
    return tuple(
        PoolPlan(
            site=p.site,
            chip=p.chip,
            role=str(p.role),
            instances=p.instances,
            tp=p.tp,
            pp=p.pp,
            dp=p.dp,
            ep=p.ep,
            chunk_tokens=p.chunk_tokens,
            cost_per_hour=p.cost(ev.chips),
            reason=pool_reason(ev, design, p, analytic, chosen),
        )
        for p in sorted(design.pools, key=lambda p: role_order(p.role))
    )


def _bathtub(
    inputs: PlannerInputs,
    ev: Evaluator,
    chosen: Verification,
    table: RoutingTable,
    best: dict[str, Verification | None],
) -> Bathtub:
    """The bathtub of PDD's best design (the chosen one's when PDD has none), with the
    homogeneous same-dc design and the other families' bests beside it."""
    design, base, pdd_best = chosen.design, best[SAME_DC], best[PDD]
    tub_design = pdd_best.design if pdd_best is not None else design
    tub_table = table if tub_design is design else tub_design.table
    rivals = [v.design for f, v in best.items() if f != PDD and v is not None]
    return bathtub(
        ev,
        replace(tub_design, table=tub_table),
        inputs.settings.bathtub_points,
        inputs,
        homogeneous=base.design if base is not None and tub_design.policy == PDD else None,
        rivals=rivals if tub_design.policy == PDD else (),
    )


def _analytic_dict(analytic: Evaluation) -> dict[str, Any]:
    """What the plan keeps of the analytic model's verdict on its design."""
    return {
        "ttft": analytic.ttft,
        "tpot": analytic.tpot,
        "goodput_rps": analytic.goodput_rps,
        "stages": [
            {"name": s.name, "utilisation": s.utilisation, "capacity_rps": s.capacity_rps}
            for s in analytic.stages
        ],
        "shares": analytic.shares,
    }


def _cheapest(designs: Sequence[Verification], ev: Evaluator) -> Verification:
    """The cheapest design (the most good requests per dollar among equals)."""
    return min(designs, key=lambda v: (v.design.cost(ev.chips), -v.summary.bcr))


def _simulation_row(v: Verification) -> dict[str, Any]:
    return {
        "design": v.design.label(),
        "policy": v.design.policy,
        "family": v.design.family,
        "transfer_budget_s": v.design.table.transfer_budget_s,
        "sla_met": v.summary.sla_met,
        "rejected": v.summary.rejected,
        "bcr": v.summary.bcr,
        "cost_per_hour": v.summary.cost_per_hour,
        "ttft_p99": v.summary.ttft_p99,
        "cause": v.cause,
        "missed": list(v.missed),
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
        f"{s.rejected} rejected: {last.miss_text()}."
    ]
    fixes = ["raise the chip limits, relax the SLA, or raise simulations in [planner]"]
    return Infeasible(inputs.name, inputs.model.id, tuple(problems), tuple(fixes), search_info)


def make_plan(
    inputs: PlannerInputs,
    progress: Progress | None = None,
    timings: dict[str, float] | None = None,
) -> PlanOutcome:
    """Plan in this process: prepare, verify the first round, finish (``timings``: see
    ``finish``)."""
    report = progress or _noop
    prepared = prepare(inputs, report)
    if not prepared.found.any_feasible():
        return finish(inputs, prepared, [], report)
    checked = []
    designs = first_round(inputs, prepared)
    for index, design in enumerate(designs):
        report(0.2 + 0.5 * index / len(designs), f"simulating {design.label()}")
        checked.append(verify(inputs, design))
    outcome = finish(inputs, prepared, checked, report, timings)
    report(1.0, "done")
    return outcome
