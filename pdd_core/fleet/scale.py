"""A demand's design, found on a slice of its sessions, sized for the whole of them.

The design search runs on every k-th session of the peak window (``demand.slice_window``), so
its design carries 1/k of the load. k copies of it carry the whole: each copy sees a slice like
the one it was confirmed on, and pooling the copies behind one router only smooths their peaks.
That k-fold design is simulated on the whole window at full rate; where it meets the SLA, every
pool is shrunk by a common factor f (instances ``ceil(f x k x n)``, at least one) and the
smallest f in [1/4, 1] that still meets the SLA is found by bisection (``scale_steps`` steps,
each one simulation of the whole window). Shrinking pays because a slice's design rounds each
pool up to whole instances: a slice needing 1.2 MD instances gets 2, and k copies of it hold
k x 0.8 idle ones. A quarter is the floor, a stated limit of the search (each halving of the
range costs one more simulation of the whole window); the factors tried are reported, so a
design that ends at the floor says it might shrink further.

k copies may also miss at full rate: one router spreads every session over all the instances,
where each slice kept its sessions on its own few, so prefix caches hit less and load spreads
unevenly. The factor then grows (1.25, 1.5, 2) until the SLA holds, and the bisection runs
between the last miss and the first that holds; a design that misses even at twice the k
copies is reported as missing, with its figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pdd_core.planner.design import Design
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.result import Plan, clean
from pdd_core.planner.verify import Verification, verify
from pdd_core.specs import ChipSpec

FLOOR = 0.25
# Factors tried, in turn, when k copies miss the SLA at full rate.
GROWTH = (1.25, 1.5, 2.0)


@dataclass(frozen=True, slots=True)
class Scaled:
    """The design at full rate, its simulation on the whole window, and every factor tried."""

    design: Design
    verification: Verification
    factor: float
    every: int
    tried: tuple[tuple[float, bool], ...]
    simulated_requests: int

    def to_dict(self, chips: Mapping[str, ChipSpec]) -> dict[str, Any]:
        s = self.verification.summary
        result: dict[str, Any] = clean(
            {
                "family": self.design.family,
                "design": self.design.label(),
                "pools": [p.to_dict() | {"chips": p.chips} for p in self.design.pools],
                "chips": sum(p.chips for p in self.design.pools),
                "cost_per_hour": self.design.cost(chips),
                "factor": self.factor,
                "every": self.every,
                "tried": [{"factor": f, "sla_met": met} for f, met in self.tried],
                "sla_met": s.sla_met,
                "missed": list(self.verification.missed),
                "requests": s.requests,
                "rejected": s.rejected,
                "ttft_p90": s.ttft_p90,
                "ttft_p99": s.ttft_p99,
                "tpot_p90": s.tpot_p90,
                "tpot_p99": s.tpot_p99,
                "goodput_rps": s.goodput_rps,
                "output_tokens_per_s": s.output_tokens_per_s,
                "hit_token_weighted": s.hit_token_weighted,
                "wan_gbps_mean": s.wan_gbps_mean,
            }
        )
        return result


def scaled(design: Design, every: int, factor: float) -> Design:
    """``design`` with each pool's instances ``ceil(factor x every x n)`` (at least one)."""
    out = design
    for pool in design.pools:
        if pool.instances > 0:
            count = max(1, math.ceil(factor * every * pool.instances - 1e-9))
            out = out.with_instances(pool.role, count)
    return out


def scale_to_window(inputs: PlannerInputs, plan: Plan, every: int, steps: int) -> Scaled:
    """The cheapest common factor of ``plan``'s design, k-fold, that meets the SLA on
    ``inputs``' requests (the whole window, full rate): see the module docstring."""
    base = plan.design()
    tried: list[tuple[float, bool]] = []

    def check(factor: float) -> Verification:
        verification = verify(inputs, scaled(base, every, factor))
        tried.append((factor, verification.summary.sla_met))
        return verification

    best, factor = check(1.0), 1.0
    low = FLOOR
    if not best.summary.sla_met:
        low = 1.0
        for grown in GROWTH:
            best, factor = check(grown), grown
            if best.summary.sla_met:
                break
            low = grown
        else:
            return _scaled(best, factor, every, tried, inputs)
    elif every == 1:
        return _scaled(best, factor, every, tried, inputs)  # the search ran on this very window
    high = factor
    for _ in range(steps):
        mid = (low + high) / 2.0
        if scaled(base, every, mid) == best.design:
            high = mid  # the same instance counts as the best: nothing to simulate
            continue
        verification = check(mid)
        if verification.summary.sla_met:
            best, factor, high = verification, mid, mid
        else:
            low = mid
    return _scaled(best, factor, every, tried, inputs)


def _scaled(
    best: Verification,
    factor: float,
    every: int,
    tried: list[tuple[float, bool]],
    inputs: PlannerInputs,
) -> Scaled:
    return Scaled(best.design, best, factor, every, tuple(tried), len(inputs.requests) * len(tried))
