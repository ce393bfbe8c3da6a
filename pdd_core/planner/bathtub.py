"""The bathtub of DOMAIN.md section 7: what a deployment earns against the workload's hit rate.

For the chosen deployment (pools and routing table fixed) the workload profile's mean hit is moved
along a grid (``WorkloadProfile.with_mean_hit``) and, at each point, the analytic model finds the
*largest arrival rate the deployment serves within the SLA* (bisection on a rate factor). That
SLA goodput over the cost rate is the BCR; the same rate times the mean revenue of a request at
that hit rate (the price book: miss input, hit input at its discount, output) over the cost is the
revenue per cost. The current workload's point is evaluated the same way, so it sits on the
curve.

A second series re-sizes the same chips (same chip and tp per role, same routing table) for the
workload's own rate at each hit rate with the search's sizing rule, so it shows what each hit
rate costs to serve; the valley is marked on it (DOMAIN.md section 7's "benefit against hit
rate" of a deployment that follows its workload), and on the fixed curve where no re-size fits.

Both walls of the tub, and whether PDD pays there, as economics: with the best design of every
other family given (``rivals``: homogeneous and heterogeneous same-dc, aggregated), each point
also re-sizes *their* chips for the same workload, and puts PDD's cost at the SLA beside the
cheapest of theirs (``best_other_cost_per_hour``, ``best_other_family``); ``pdd_pays`` says
whether PDD's re-sized chips meet the SLA for less. Points where a side meets the SLA at no
size are marked apart (``status``: ``both``, ``pdd-only``, ``other-only``, ``neither``), so the
economic crossover (``crossovers``) is not confused with a wall where nothing is feasible. These
re-sizings are the analytic model's (the simulator verifies the current workload's designs).
At low hit the WAN (every miss crosses it) and prefill bind, and PDD
stops paying; at very high hit there is little left to move or prefill, and the comparison is
decode against decode. ``Bathtub.to_dict()["no_pay_hit_rates"]`` lists where it does not pay.

Why the maximum SLA rate rather than the workload's own rate: at a fixed rate every point the
deployment can carry has the same goodput, and the curve would only show where it falls over;
the operator's question ("stay away from the valley") is what each hit rate is worth per dollar.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pdd_core.planner.capacity import Evaluator
from pdd_core.planner.design import Design
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.judge import revenue_per_request
from pdd_core.planner.profile import WorkloadProfile
from pdd_core.planner.search import size_design
from pdd_core.planner.stages import evaluate


@dataclass(frozen=True, slots=True)
class BathtubPoint:
    """One hit rate: SLA goodput, BCR, revenue per cost and the binding stage there."""

    hit_rate: float
    goodput_rps: float
    bcr: float
    revenue_per_cost: float
    binding: str
    resized_cost_per_hour: float | None = None
    resized_bcr: float | None = None
    resized_revenue_per_cost: float | None = None
    homogeneous_cost_per_hour: float | None = None
    pdd_pays: bool | None = None
    best_other_cost_per_hour: float | None = None
    best_other_family: str | None = None
    status: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Bathtub:
    """The curve, the index of its valley and the current workload's point."""

    points: tuple[BathtubPoint, ...]
    valley_index: int
    current: BathtubPoint

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [p.to_dict() for p in self.points],
            "valley_index": self.valley_index,
            "valley": self.points[self.valley_index].to_dict() if self.points else None,
            "current": self.current.to_dict(),
            "no_pay_hit_rates": [p.hit_rate for p in self.points if p.pdd_pays is False],
            "crossovers": crossovers(self.points),
        }


def crossovers(points: tuple[BathtubPoint, ...]) -> list[float]:
    """Hit rates between two neighbouring points, both feasible for both sides, where PDD's
    re-sized cost crosses the best other family's (the economic crossover, not a wall)."""
    found = []
    for a, b in itertools.pairwise(points):
        if a.status == b.status == "both" and a.pdd_pays is not b.pdd_pays:
            found.append(round((a.hit_rate + b.hit_rate) / 2, 4))
    return found


def hit_grid(points: int) -> list[float]:
    """``points`` hit rates from 0 to 0.98 (a mean of exactly 1 would mean no prefill at all)."""
    if points < 2:
        return [0.9]
    return [round(0.98 * i / (points - 1), 4) for i in range(points)]


def bathtub_point(
    ev: Evaluator,
    design: Design,
    profile: WorkloadProfile,
    inputs: PlannerInputs | None = None,
    homogeneous: Design | None = None,
    *,
    rivals: Sequence[Design] = (),
) -> BathtubPoint:
    """The largest SLA rate of ``design`` on ``profile`` and what it earns (module docstring);
    with ``inputs``, also the same chips re-sized for the workload's own rate at this hit, and
    the best homogeneous design's chips re-sized the same way (does PDD pay at this hit?)."""
    cost = design.cost(ev.chips)
    local = ev if profile is ev.profile else ev.for_profile(profile)

    lo = sla_factor(local, design, profile)
    rate = profile.rate_rps * lo
    evaluation = evaluate(local, design, profile.scaled(max(lo, 1e-3)))
    revenue = float(revenue_per_request(ev.prices, profile).mean())
    resized: tuple[float, float, float] | None = None
    other: tuple[float, float, float] | None = None
    best_other: tuple[float, str] | None = None
    if inputs is not None:
        resized = _resized(local, design, inputs)
        if homogeneous is not None:
            other = _resized(local, homogeneous, inputs)
        for rival in rivals:
            sized = _resized(local, rival, inputs)
            if sized is not None and (best_other is None or sized[0] < best_other[0]):
                best_other = (sized[0], rival.family)
    if best_other is None and other is not None and homogeneous is not None:
        best_other = (other[0], homogeneous.family)
    # PDD pays at this hit rate when some size of its chips meets the SLA for less than every
    # other family's chips need (or they meet it at no size); where no PDD size meets it, it
    # does not pay, whatever the others do.
    pays: bool | None = None
    compared = bool(rivals) or homogeneous is not None
    if compared and inputs is not None:
        pays = resized is not None and (best_other is None or resized[0] < best_other[0])
    status = ""
    if compared and inputs is not None:
        status = {
            (True, True): "both",
            (True, False): "pdd-only",
            (False, True): "other-only",
            (False, False): "neither",
        }[(resized is not None, best_other is not None)]
    return BathtubPoint(
        hit_rate=round(profile.mean_hit, 4),
        goodput_rps=rate,
        bcr=rate / cost if cost > 0 else math.nan,
        revenue_per_cost=rate * 3600 * revenue / cost if cost > 0 else math.nan,
        binding=evaluation.binding,
        resized_cost_per_hour=resized[0] if resized else None,
        resized_bcr=resized[1] if resized else None,
        resized_revenue_per_cost=resized[2] if resized else None,
        homogeneous_cost_per_hour=other[0] if other else None,
        pdd_pays=pays,
        best_other_cost_per_hour=best_other[0] if best_other else None,
        best_other_family=best_other[1] if best_other else None,
        status=status,
    )


def sla_factor(local: Evaluator, design: Design, profile: WorkloadProfile) -> float:
    """The largest factor of ``profile``'s rate at which ``design`` meets the SLA analytically
    (doubling, then 14 bisection steps); 0 when it misses even at a thousandth of it."""

    def meets(factor: float) -> bool:
        return evaluate(local, design, profile.scaled(factor)).meets_sla

    lo, hi = 0.0, 1.0
    while meets(hi) and hi < 1024:
        lo, hi = hi, hi * 2
    if lo == 0.0 and not meets(1e-3):
        hi = 0.0
    for _ in range(14):
        if hi <= 0:
            break
        mid = (lo + hi) / 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _resized(
    local: Evaluator, design: Design, inputs: PlannerInputs
) -> tuple[float, float, float] | None:
    """(cost, BCR, revenue per cost) of ``design``'s chips re-sized for ``local``'s profile."""
    skeleton = design
    for pool in design.pools:
        skeleton = skeleton.with_instances(pool.role, 1)
    scored, _ = size_design(local, inputs, skeleton)
    if scored is None:
        return None
    e = scored.evaluation
    return (e.cost_per_hour, e.bcr, e.revenue_per_hour / e.cost_per_hour)


def bathtub(
    ev: Evaluator,
    design: Design,
    points: int,
    inputs: PlannerInputs | None = None,
    *,
    homogeneous: Design | None = None,
    rivals: Sequence[Design] = (),
) -> Bathtub:
    """The curve over ``hit_grid(points)`` plus the current workload's own point.

    The valley is the lowest revenue per cost of the re-sized series where it exists (each hit
    rate with the deployment it needs: DOMAIN.md section 7's "benefit against hit rate"), else
    of the fixed deployment's own curve.
    """
    curve = tuple(
        bathtub_point(ev, design, ev.profile.with_mean_hit(h), inputs, homogeneous, rivals=rivals)
        for h in hit_grid(points)
    )
    resized = [i for i, p in enumerate(curve) if p.resized_revenue_per_cost is not None]
    if resized:
        valley = min(resized, key=lambda i: (curve[i].resized_revenue_per_cost or 0.0, i))
    else:
        valley = min(range(len(curve)), key=lambda i: (curve[i].revenue_per_cost, i))
    current = bathtub_point(ev, design, ev.profile, inputs, homogeneous, rivals=rivals)
    return Bathtub(curve, valley, current)
