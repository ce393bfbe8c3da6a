"""The verdict's evidence: each family's best design measured over independent workloads.

The search confirms each family's cheapest design on the scenario's own workload (one
realisation). Whether PDD *pays* is a statement about capacity per dollar, so it is measured
as a statistic: ``sim.measure.measure_capacity`` over ``settings.capacity_seeds`` independent
workloads (the scenario's generator at independent seeds for a generated workload; disjoint
windows of equal duration for a fixed trace, ``sim.measure.trace_windows``), the SLA judged
over all their requests at a rate, to ``capacity_resolution``, with a bootstrap interval whose
replicates are paired across designs. This is the expensive part of a plan after the search
(tens of simulations per design), reported with its own CPU time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.verify import Verification, design_runner
from pdd_core.sim.measure import MeasuredCapacity, Window, measure_capacity, trace_windows


def workloads(inputs: PlannerInputs) -> list[Window]:
    """The independent workloads of ``inputs`` (module docstring); [] when none are asked."""
    count = inputs.settings.capacity_seeds
    if count < 1:
        return []
    spec = inputs.workload
    if spec is not None:
        # Seed k of a generated workload: the same generator at seed + k (k = 0: the planned one).
        loads = [list(inputs.requests)]
        loads += [replace(spec, seed=spec.seed + k).requests() for k in range(1, count)]
        return [Window(load, 0.0) for load in loads]
    return trace_windows(inputs.requests, count)


def measure(inputs: PlannerInputs, verification: Verification) -> MeasuredCapacity | None:
    """The capacity of a verified design over the workloads (None when none are asked)."""
    loads = workloads(inputs)
    if not loads:
        return None
    design = verification.design
    run = design_runner(inputs, design)
    return measure_capacity(
        run,
        [w.requests for w in loads],
        inputs.sla,
        design.cost(inputs.chips),
        judged_from=[w.judged_from for w in loads],
        resolution=inputs.settings.capacity_resolution,
        seed=inputs.config.seed,
    )


def measure_families(
    inputs: PlannerInputs, best: Mapping[str, Verification | None]
) -> dict[str, MeasuredCapacity]:
    """``measure`` for every family's best design (families without one are left out)."""
    found: dict[str, MeasuredCapacity] = {}
    for family, verification in best.items():
        if verification is not None:
            measured = measure(inputs, verification)
            if measured is not None:
                found[family] = measured
    return found
