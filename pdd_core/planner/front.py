"""The analytic front every design family's simulated search starts from: shapes x counts.

The analytic model sizes one count per role for each skeleton (``search.size_design``); a
family's cheapest design that meets the SLA in the simulator is rarely exactly that size (the
model is optimistic on the TTFT tail and pessimistic on decode KV), and whole-node costs mean a
design one node cheaper is a different answer. So each skeleton's counts are *enumerated* around
its sizing, every combination evaluated analytically, and the simulator's search
(``planner.improve``) walks this front under a cost order: re-splits of a chip budget between
P and D, other shapes and other chunk budgets are all members of it, not only "one more instance
of the same shape".

A member is dropped only on bounds the simulator cannot beat: prefill (or a colocated
instance's whole work) above 100% of its instances, a decode chip that holds no sequence, or,
for a disaggregated P, a TTFT floor (every queue empty) already over the target. Everything else
stays, ranked by ``margin``: how far inside the SLA the analytic model puts it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pdd_core.planner.capacity import MAX_UTILISATION, Constraint, Evaluation, Evaluator
from pdd_core.planner.design import COLOCATED, Design
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.stages import evaluate
from pdd_core.specs import SLA, Role

# Counts enumerated on each side of a skeleton's analytic size, per role.
SPREAD = 2
# The front keeps designs up to this multiple of the family's cheapest analytic design.
COST_CAP = 1.6
# A disaggregated P whose empty-queue TTFT is this far over the target is out of reach.
FLOOR_SLACK = 1.05


@dataclass(frozen=True, slots=True)
class Member:
    """One design of the front, its analytic evaluation and ``margin`` (>= 1: inside the SLA)."""

    design: Design
    evaluation: Evaluation
    margin: float


def margin(evaluation: Evaluation, sla: SLA) -> float:
    """The smallest ratio of headroom over every SLA target and stage (1 = on the edge).

    Targets over the predicted percentiles (TTFT and TPOT at P90 and P99), and the utilisation
    limit over each stage's utilisation; the analytic model's own verdict is ``margin >= 1``
    up to its rounding. Used to rank, never to decide: the simulator decides.
    """
    ratios = [
        sla.ttft_p90_s / max(evaluation.ttft["p90"], 1e-9),
        sla.ttft_p99_s / max(evaluation.ttft["p99"], 1e-9),
        sla.tpot_p90_s / max(evaluation.tpot["p90"], 1e-9),
        sla.tpot_p99_s / max(evaluation.tpot["p99"], 1e-9),
    ]
    ratios += [MAX_UTILISATION / s.utilisation for s in evaluation.stages if s.utilisation > 0]
    value = min(ratios)
    return value if math.isfinite(value) else 0.0


def out_of_reach(ev: Evaluator, design: Design, evaluation: Evaluation, sla: SLA) -> bool:
    """Bounds no simulation can beat (module docstring); an aggregated design's floor is its
    prefill alone on an idle instance."""
    if any(v.kind in (Constraint.DECODE_FIT, Constraint.RELAY_FIT) for v in evaluation.violations):
        return True
    for stage in evaluation.stages:
        if stage.name in (Constraint.PREFILL, Constraint.COLOCATED) and stage.utilisation >= 1.0:
            return True
    if design.policy == COLOCATED:
        alone = ev.prefill_service(design.prefill.chip, design.prefill.shape)
        floor = {"p90": float(np.percentile(alone, 90)), "p99": float(np.percentile(alone, 99))}
    else:
        floor = evaluation.ttft_service
    return bool(
        floor["p90"] > FLOOR_SLACK * sla.ttft_p90_s or floor["p99"] > FLOOR_SLACK * sla.ttft_p99_s
    )


def _counts(base: int) -> range:
    return range(max(1, base - SPREAD), base + SPREAD + 1)


def _variants(design: Design) -> Iterable[Design]:
    """``design`` with its P and D counts (the one pool of an aggregated design) enumerated."""
    if design.policy == COLOCATED:
        for n in range(
            max(1, design.prefill.instances - SPREAD - 1), design.prefill.instances + SPREAD + 2
        ):
            yield design.with_instances(Role.PREFILL, n)
        return
    for p in _counts(design.prefill.instances):
        for d in _counts(design.decode.instances):
            yield design.with_instances(Role.PREFILL, p).with_instances(Role.MAIN_DECODE, d)


def family_front(
    ev: Evaluator, inputs: PlannerInputs, bases: Sequence[Design], cheapest: float | None
) -> tuple[Member, ...]:
    """The front of one family from its skeletons' sized (or starting) designs ``bases``.

    ``cheapest`` is the family's cheapest analytically sized cost: members above ``COST_CAP``
    times it are left out (None keeps every count within the chip limits).
    """
    cap = COST_CAP * cheapest if cheapest is not None else math.inf
    seen: set[Design] = set()
    members: list[Member] = []
    for base in bases:
        for design in _variants(base):
            if design in seen:
                continue
            seen.add(design)
            cost = design.cost(ev.chips)
            if cost > cap or inputs.over_limit(design) is not None:
                continue
            evaluation = evaluate(ev, design)
            if out_of_reach(ev, design, evaluation, inputs.sla):
                continue
            members.append(Member(design, evaluation, margin(evaluation, inputs.sla)))
    members.sort(key=lambda m: (m.evaluation.cost_per_hour, -m.margin, m.design.label()))
    return tuple(members)
