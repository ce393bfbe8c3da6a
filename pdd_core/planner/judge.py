"""The analytic judge: a design's sampled TTFT and TPOT against the SLA, its goodput and price.

Both analytic models end here, the disaggregated stage chain (``planner.stages``) and the
aggregated fixed point (``planner.colocated``): each hands its per-request TTFT samples, its
TPOT percentiles and its stages to ``verdict``, which says whether the design meets the SLA,
what binds it and what it earns per dollar.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pdd_core import metrics
from pdd_core.planner.capacity import (
    TTFT_TAIL,
    Constraint,
    Evaluation,
    Evaluator,
    StageView,
    Violation,
)
from pdd_core.planner.design import Design
from pdd_core.planner.profile import FloatArray, WorkloadProfile
from pdd_core.specs import PriceBook


def revenue_per_request(prices: PriceBook, p: WorkloadProfile) -> FloatArray:
    """What each sampled request earns at ``prices``: its miss, hit and output tokens."""
    earned: FloatArray = (
        p.miss_tokens * prices.miss_input_per_mtok
        + p.hit_tokens * prices.hit_input_per_mtok
        + p.output_tokens * prices.output_per_mtok
    ) / 1e6
    return earned


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
    revenue = rate * 3600 * float(revenue_per_request(ev.prices, p).mean())
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


def tpot_at(mean_batch: float, step_s: Callable[[int], float]) -> dict[str, float]:
    """TPOT at the mean batch (P50) and at the mean plus 1.28 / 2.33 Poisson sigmas, from
    ``step_s(batch)``, the iteration time at a batch size."""
    result = {}
    for key, z in (("p50", 0.0), ("p90", 1.28), ("p99", 2.33)):
        result[key] = step_s(max(1, math.ceil(mean_batch + z * math.sqrt(mean_batch))))
    return result
