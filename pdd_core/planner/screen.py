"""The analytic screen: which instance shapes of a chip are worth sizing for each role.

Every valid shape is scored by the analytic model and a few per role survive (``shape_options``);
the skeletons (``planner.skeletons``) are built from the survivors only, so what the screen drops
no simulation ever tries. A P shape is scored by what a P pool is bought by: the whole instances
that meet the TTFT targets at the workload's rate (``prefill_pool``).
"""

from __future__ import annotations

import math

import numpy as np

from pdd_core.planner.capacity import MAX_UTILISATION, Evaluator, gg_wait
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.specs import SLA, InstanceShape, Role, kv_tokens_per_rank, valid_shapes


def shape_options(
    ev: Evaluator, inputs: PlannerInputs, chip: str, role: Role, keep: int | None = None
) -> list[InstanceShape]:
    """The instance shapes worth sizing for ``role`` on ``chip``, screened from every valid one.

    Every valid shape (``specs.valid_shapes``: TP over the divisors of the scale-up domain, so
    TP 1..domain, times the pipeline depths that hold the weights) whose one rank holds a mean
    request and whose chips pack whole nodes is scored by the analytic model, and the ``keep``
    best per role survive: P by the chips of the smallest pool of that shape whose prefills
    alone meet the TTFT targets (``prefill_pool``), plus the fastest single prefill, which the
    TTFT tail may need; MD and RLD by chip-seconds per decoded token at the batch they can run.
    Data-parallel attention shapes are valid (``specs.shape``) but not proposed: the simulator
    does not model per-rank schedulers yet, and a plan must verify.
    """
    keep = inputs.settings.shapes_per_role if keep is None else keep
    spec = inputs.chips[chip]
    need = 1
    if inputs.requests:
        total = sum(r.input_tokens + r.output_tokens for r in inputs.requests)
        need = int(total) // len(inputs.requests)
    node = spec.chips_per_node
    limit = inputs.limit_for(chip)
    shapes = [
        s
        for s in valid_shapes(inputs.model, spec, max_chips=limit)
        if s.dp == 1
        and (s.chips % node == 0 or node % s.chips == 0)
        and kv_tokens_per_rank(inputs.model, spec, s) >= need
    ]
    if not shapes:
        return []
    if role is Role.PREFILL:
        speed = {s: float(ev.prefill_service(chip, s).mean()) for s in shapes}
        pool = {s: prefill_pool(ev, inputs.sla, chip, s, limit) for s in shapes}
        ranked = sorted(shapes, key=lambda s: (*pool[s], s.chips, s.label()))
        chosen = ranked[:keep]
        fastest = min(shapes, key=lambda s: (speed[s], s.chips, s.label()))
        if fastest not in chosen:
            chosen.append(fastest)
        return chosen
    drc = role is Role.MAIN_DECODE and ev.config.drc

    def per_token(s: InstanceShape) -> float:
        batch, step, _ = ev.decode_batch(chip, s, drc=drc)
        return step * s.chips / batch if batch else math.inf

    ranked = sorted(shapes, key=lambda s: (per_token(s), s.chips, s.label()))
    usable = [s for s in ranked if math.isfinite(per_token(s))]
    if role is Role.RELAY_DECODE:
        # RLD only masks latency: the smallest instance that serves one sequence is the slice.
        return sorted(usable, key=lambda s: (s.chips, per_token(s), s.label()))[:1]
    return usable[:keep]


def prefill_pool(
    ev: Evaluator, sla: SLA, chip: str, shape: InstanceShape, limit: int
) -> tuple[float, float]:
    """(chips, TTFT P90) of the smallest pool of ``shape`` whose prefills alone meet the TTFT
    targets at the profile's rate: each request's prefill plus its wait in the pool's G/G/n
    queue (``stages.evaluate_design``'s P stage, before transfer and decode); (inf, its best
    P90) when no pool within ``limit`` chips does.

    Chip-seconds per request alone miss two things a P pool is bought by: whole instances (at
    3.4 req/s one 24-chip instance carries what takes two 16-chip ones) and the pipeline (a
    deep-PP instance holds several prefills at once, so it is occupied for less than its
    latency). Mooncake's cheapest same-dc design has P 1 x h800 tp4xpp6, which ranked fifth
    by latency x chips and was never sized.
    """
    rate = ev.profile.rate_rps
    service = ev.prefill_service(chip, shape)
    occupied = ev.prefill_occupancy(chip, shape)
    uniform, exponential = ev.draws(0)
    best = math.inf
    for n in range(1, max(1, limit // shape.chips) + 1):
        if rate * float(occupied.mean()) / n >= MAX_UTILISATION:
            continue
        wait = gg_wait(n, rate, occupied, ev.profile.arrival_cv2)
        ttft = service + wait.draw(uniform, exponential)
        p90, p99 = (float(v) for v in np.percentile(ttft, [90, 99]))
        best = min(best, p90)
        if p90 <= sla.ttft_p90_s and p99 <= sla.ttft_p99_s:
            return float(n * shape.chips), p90
    return math.inf, best
