"""Routing thresholds tuned for a design on its line: the one way the planner tunes them.

A routing table belongs to a design *and a line*. The transfer budget decides which requests go
P-MD (their KV fits the budget on this line) and which relay through RLD while the KV crosses;
on a faster line the same budget sends more requests P-MD, so MD takes their whole decode and
RLD less. When MD is the weaker decode pool, that can lower capacity: on the small scenario's
pools with an H800 x 16 RLD pool and one H20 x 8 MD, a 2 s budget carries 0.67 req/s at 10 Gbps,
0.26 at 20 and 0.61 at 40 (``docs/planner.md``). Re-tuned for each line, the designs tested never
lose capacity on a faster line (``tests/pdd_core/planner/test_wan_property.py``). That is
observed, not proven: a faster line finishes every transfer no later (``transfer.FairShareLink``,
property-tested), and among the candidates a smaller budget keeps more requests relayed, but
nothing guarantees that some candidate reproduces the slower line's routing exactly.

``tune_routing`` is therefore what both the planner and anyone who changes a line call:

1. the candidates are the design's own table and every ``transfer_budgets_s x
   singular_min_inputs`` of the planner's settings. Each is simulated: the analytic model cannot
   rank them (on the small scenario it predicts the same shares for budgets whose simulated
   capacities differ by 20%, and calls designs the simulator serves infeasible);
2. each is simulated at capacity (``pdd_core.sim.capacity.find_capacity``: the highest
   session-scaled rate at which the SLA holds, rejections counted as misses) and the highest
   capacity wins; ties keep the earlier candidate (the design's own table first, then the
   planner's order), so the answer is deterministic for the inputs' seed;
3. the handoff thresholds follow from the extend cost and the line (``choose_handoff``), not
   from the budget, so every candidate carries them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pdd_core.planner.capacity import Evaluator
from pdd_core.planner.design import PDD, Design
from pdd_core.planner.handoff import choose_handoff
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.profile import WorkloadProfile
from pdd_core.planner.stages import evaluate
from pdd_core.planner.verify import Verification, design_runner, verify
from pdd_core.routing import RoutingTable
from pdd_core.sim.capacity import Capacity, find_capacity
from pdd_core.specs import LinkKind

# Bisection steps of each candidate's capacity search after bracketing: two give the boundary
# within a factor of 2^(1/4) (19%) of the bracket, enough to rank tables of one design.
TUNING_ITERATIONS = 2


@dataclass(frozen=True, slots=True)
class Tuned:
    """The design with its tuned table, its capacity, and every candidate's capacity."""

    design: Design
    capacity: Capacity
    candidates: tuple[tuple[RoutingTable, float], ...]
    reason: str


def with_wan_bandwidth(inputs: PlannerInputs, gbps: float) -> PlannerInputs:
    """``inputs`` with every WAN line at ``gbps`` (RTT and jitter kept)."""
    links = tuple(
        replace(link, bandwidth_gbps=gbps) if link.kind is LinkKind.WAN else link
        for link in inputs.links
    )
    return replace(inputs, links=links)


def evaluator_for(inputs: PlannerInputs, profile: WorkloadProfile) -> Evaluator:
    """The analytic model of ``inputs``' links, chips and SLA over ``profile``."""
    wan = next((lk for lk in inputs.links if lk.kind is LinkKind.WAN), None)
    rdma = next((lk for lk in inputs.links if lk.kind is LinkKind.RDMA), None)
    return Evaluator(
        model=inputs.model,
        chips=dict(inputs.chips),
        wan=wan,
        rdma=rdma,
        sla=inputs.sla,
        prices=inputs.prices,
        config=inputs.config,
        profile=profile,
        seed=inputs.seed,
    )


def design_capacity(
    inputs: PlannerInputs, design: Design, *, iterations: int = TUNING_ITERATIONS
) -> Capacity:
    """Capacity goodput of ``design`` (its own table) on ``inputs``' workload and links."""
    run = design_runner(inputs, design)
    return find_capacity(
        run,
        inputs.requests,
        inputs.sla,
        design.cost(inputs.chips),
        iterations=iterations,
        seed=inputs.config.seed,
    )


def candidate_tables(inputs: PlannerInputs, design: Design) -> list[RoutingTable]:
    """The design's table, then every budget x singular threshold of the planner's settings."""
    tables = [design.table]
    for budget in inputs.settings.transfer_budgets_s:
        for smin in inputs.settings.singular_min_inputs:
            table = replace(design.table, transfer_budget_s=budget, singular_min_input_tokens=smin)
            if table not in tables:
                tables.append(table)
    return tables


def tune_routing(
    inputs: PlannerInputs,
    design: Design,
    evaluator: Evaluator,
    *,
    iterations: int = TUNING_ITERATIONS,
) -> Tuned:
    """Tune ``design``'s routing table for ``inputs``' line (see the module docstring).

    ``evaluator`` must model the same links as ``inputs`` (``evaluator_for``). A design that is
    not PDD has no cross-site routing: its table is kept and only its capacity measured.
    """
    if design.policy != PDD:
        capacity = design_capacity(inputs, design, iterations=iterations)
        return Tuned(design, capacity, ((design.table, capacity.goodput_rps),), "")
    # The handoff thresholds follow from the extend cost and the line, not from the budget:
    # every candidate is measured with them.
    relay = evaluate(evaluator, design).stage("RLD capacity")
    handoff = choose_handoff(evaluator, design, relay.utilisation if relay else 0.0)
    rows: list[tuple[RoutingTable, float]] = []
    best: tuple[Design, Capacity] | None = None
    for table in candidate_tables(inputs, replace(design, table=handoff.table)):
        candidate = replace(design, table=table)
        capacity = design_capacity(inputs, candidate, iterations=iterations)
        rows.append((table, capacity.goodput_rps))
        if best is None or capacity.goodput_rps > best[1].goodput_rps:
            best = (candidate, capacity)
    assert best is not None  # the design's own table is always a candidate
    chosen, capacity = best
    tried = "; ".join(
        f"{t.transfer_budget_s:g} s / {t.singular_min_input_tokens:,}: {goodput:.3g}"
        for t, goodput in rows
    )
    wan = evaluator.wan
    line = f"{wan.bandwidth_gbps:g} Gbps" if wan is not None else "no WAN"
    reason = (
        f"transfer budget {chosen.table.transfer_budget_s:g} s and singular threshold "
        f"{chosen.table.singular_min_input_tokens:,} tokens carry the most within the SLA on "
        f"the {line} line: {capacity.goodput_rps:.3g} req/s at capacity (simulated; "
        f"budget / singular threshold: req/s: {tried})."
    )
    return Tuned(chosen, capacity, tuple(rows), reason)


@dataclass(frozen=True, slots=True)
class PlannedRouting:
    """The recommended design's verification and routing table, and the sentences behind them."""

    chosen: Verification
    table: RoutingTable
    handoff_reason: str
    tuning_reason: str


def plan_routing(
    inputs: PlannerInputs,
    evaluator: Evaluator,
    chosen: Verification,
    confirmed: Callable[[Verification], bool],
) -> PlannedRouting:
    """The planner's routing step for its recommended design ``chosen``.

    PDD: the handoff thresholds (``choose_handoff``), then ``tune_routing`` when the workload is
    within ``settings.tuning_max_requests``; a re-tuned table is verified on the planned load
    and replaces the sized one only when ``confirmed``. Other families have no cross-site
    routing and keep their table.
    """
    design = chosen.design
    if design.policy != PDD:
        return PlannedRouting(chosen, design.table, "", "")
    relay = evaluate(evaluator, design).stage("RLD capacity")
    handoff = choose_handoff(evaluator, design, relay.utilisation if relay else 0.0)
    budgets = ", ".join(f"{b:g}" for b in inputs.settings.transfer_budgets_s)
    limit = inputs.settings.tuning_max_requests
    if len(inputs.requests) > limit:
        reason = (
            f"transfer budget chosen among {budgets} s as the cheapest design the simulator "
            f"confirmed; not re-tuned by simulated capacity: the workload's "
            f"{len(inputs.requests):,} requests exceed [planner] tuning_max_requests = {limit:,}."
        )
        return PlannedRouting(chosen, handoff.table, handoff.reason, reason)
    tuned = tune_routing(inputs, design, evaluator)
    if tuned.design.table == handoff.table:
        return PlannedRouting(chosen, handoff.table, handoff.reason, tuned.reason)
    retuned = verify(inputs, tuned.design)
    if confirmed(retuned):
        return PlannedRouting(retuned, retuned.design.table, handoff.reason, tuned.reason)
    reason = (
        tuned.reason + " The simulator did not confirm it at the planned load: kept the sized one."
    )
    return PlannedRouting(chosen, handoff.table, handoff.reason, reason)
