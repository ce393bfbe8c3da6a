"""Search the design space with the analytic model: chips, tp, counts, thresholds.

For every placement DOMAIN.md's pipeline allows (P and RLD in one site, MD in another joined by a
WAN line), every candidate chip and a few tensor-parallel degrees per role, and every transfer
budget and singular threshold tried, the counts are not enumerated but *sized*: each pool starts
at the smallest count that keeps its stage below its utilisation target, then P grows until the
TTFT tail meets the SLA (or the site's chip limit stops it). The homogeneous same-dc baseline is
sized the same way. Designs are ranked by analytic BCR (goodput per $/h), ties by cost.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from pdd_core.planner.capacity import Constraint, Evaluation, Evaluator
from pdd_core.planner.design import COLOCATED, PDD, SAME_DC, Design, PoolChoice
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.specs import (
    SLA,
    InstanceShape,
    LinkKind,
    RldMode,
    Role,
    kv_tokens_per_rank,
    valid_shapes,
)

# Sizing targets: a decode pool is started at 85% of its slots, RLD at 80% (it must absorb
# bursts of relays to stay below the one-shot threshold), P at 85% before the TTFT check.
DECODE_TARGET = 0.85
RELAY_TARGET = 0.8
PREFILL_TARGET = 0.85


@dataclass(frozen=True, slots=True)
class Scored:
    """A sized design and its analytic evaluation."""

    design: Design
    evaluation: Evaluation


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked feasible designs (best first), and why the others were dropped."""

    pdd: tuple[Scored, ...]
    baseline: tuple[Scored, ...]
    rejected: tuple[str, ...]
    evaluated: int
    colocated: tuple[Scored, ...] = ()

    def ranked(self, policy: str) -> tuple[Scored, ...]:
        """The feasible designs of one policy, cheapest first."""
        if policy == PDD:
            return self.pdd
        if policy == COLOCATED:
            return self.colocated
        return self.baseline


def shape_options(
    ev: Evaluator, inputs: PlannerInputs, chip: str, role: Role, keep: int = 2
) -> list[InstanceShape]:
    """The instance shapes worth sizing for ``role`` on ``chip``, screened from every valid one.

    Every valid shape (``specs.valid_shapes``: TP over the divisors of the scale-up domain, so
    TP 1..domain, times the pipeline depths that hold the weights) whose one rank holds a mean
    request and whose chips pack whole nodes is scored by the analytic model, and the ``keep``
    best per role survive: P by chip-seconds per prefilled request (plus the fastest single
    prefill, which the TTFT tail may need), MD and RLD by chip-seconds per decoded token at the
    batch they can run. Data-parallel attention shapes are valid (``specs.shape``) but not
    proposed: the simulator does not model per-rank schedulers yet, and a plan must verify.
    """
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
        ranked = sorted(shapes, key=lambda s: (speed[s] * s.chips, s.chips, s.label()))
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


def _fits(inputs: PlannerInputs, design: Design) -> str | None:
    used: dict[tuple[str, str], int] = {}
    for pool in design.pools:
        key = (pool.site, pool.chip)
        used[key] = used.get(key, 0) + pool.chips
    for (site, chip), chips in used.items():
        limit = inputs.limit(site, chip)
        if chips > limit:
            return f"needs {chips} x {chip} in {site}, the limit is {limit}"
    return None


def _start_count(rho_at_one: float, target: float) -> int:
    if not math.isfinite(rho_at_one):
        return 1
    return max(1, math.ceil(rho_at_one / target))


def size_design(
    ev: Evaluator, inputs: PlannerInputs, skeleton: Design
) -> tuple[Scored | None, str]:
    """Counts for ``skeleton``'s chips and thresholds; (None, why) when no count works."""
    first = ev.evaluate(skeleton)
    design = skeleton
    for stage in first.stages:
        if stage.name.startswith("decode"):
            design = design.with_instances(
                Role.MAIN_DECODE, _start_count(stage.utilisation, DECODE_TARGET)
            )
        elif stage.name == "RLD capacity":
            design = design.with_instances(
                Role.RELAY_DECODE, _start_count(stage.utilisation, RELAY_TARGET)
            )
        elif stage.name in (Constraint.PREFILL, Constraint.COLOCATED):
            design = design.with_instances(
                Role.PREFILL, _start_count(stage.utilisation, PREFILL_TARGET)
            )
    last = ""
    for _ in range(64):
        over = _fits(inputs, design)
        if over:
            return None, f"{design.label()}: {over} ({last or 'capacity'})"
        evaluation = ev.evaluate(design)
        if evaluation.meets_sla:
            return Scored(design, evaluation), ""
        last = "; ".join(v.text for v in evaluation.violations)
        grow = _grow(design, evaluation, inputs.sla)
        if grow is None:
            return None, f"{design.label()}: {last}"
        design = grow
    return None, f"{design.label()}: {last}"


def _grow(design: Design, evaluation: Evaluation, sla: SLA) -> Design | None:
    """Add one instance to the pool behind the first violation (P for the TTFT tail).

    Steered by the violations' kinds (``Constraint``). None when growing cannot help: the WAN
    line is full, a single sequence does not fit, or the TTFT tail is missed with every queue
    empty (service time, not capacity). An aggregated design is the exception to the last
    rule: its prefills share each instance with the running decodes, so their service time is
    stretched by the decode share, which one more instance lowers; it grows until the SLA
    holds or the chip limit stops it, as the disaggregated families do.
    """
    colocated = design.policy == COLOCATED
    service = evaluation.ttft_service
    if not colocated and (service["p90"] > sla.ttft_p90_s or service["p99"] > sla.ttft_p99_s):
        return None
    for violation in evaluation.violations:
        kind = violation.kind
        if kind in (Constraint.DECODE_FIT, Constraint.RELAY_FIT, Constraint.WAN):
            return None
        if kind is Constraint.COLOCATED or (colocated and kind is Constraint.TPOT_TAIL):
            return design.with_instances(Role.PREFILL, design.prefill.instances + 1)
        if kind in (Constraint.DECODE_KV, Constraint.DECODE_TPOT, Constraint.TPOT_TAIL):
            return design.with_instances(Role.MAIN_DECODE, design.decode.instances + 1)
        if kind is Constraint.RELAY and design.relay is not None:
            return design.with_instances(Role.RELAY_DECODE, design.relay.instances + 1)
    md = evaluation.stage(Constraint.DECODE_KV) or evaluation.stage(Constraint.DECODE_TPOT)
    if md is not None and md.utilisation > 0.9:
        return design.with_instances(Role.MAIN_DECODE, design.decode.instances + 1)
    return design.with_instances(Role.PREFILL, design.prefill.instances + 1)


def _placements(inputs: PlannerInputs) -> list[tuple[str, str]]:
    """(P site, MD site) pairs joined by a WAN link, P's site having an RDMA fabric."""
    pairs = []
    for link in inputs.links:
        if link.kind is not LinkKind.WAN:
            continue
        for a, b in ((link.source_site, link.target_site), (link.target_site, link.source_site)):
            if inputs.candidates_for(Role.PREFILL, a) and inputs.candidates_for(
                Role.MAIN_DECODE, b
            ):
                pairs.append((a, b))
    return sorted(set(pairs))


def search(
    ev: Evaluator, inputs: PlannerInputs, progress: Callable[[float], None] | None = None
) -> SearchResult:
    """Size every skeleton, keep the feasible ones ranked, and say why the rest failed."""
    skeletons = all_skeletons(ev, inputs)
    found: dict[str, list[Scored]] = {PDD: [], SAME_DC: [], COLOCATED: []}
    rejected: list[str] = []
    for index, skeleton in enumerate(skeletons):
        scored, why = size_design(ev, inputs, skeleton)
        if scored is None:
            rejected.append(f"{skeleton.policy}: {why}")
        else:
            found[skeleton.policy].append(scored)
        if progress is not None:
            progress((index + 1) / len(skeletons))

    def rank(s: Scored) -> tuple[float, float, str]:
        # The cheapest design that meets the SLA; at equal cost the one with more goodput.
        return (s.evaluation.cost_per_hour, -s.evaluation.bcr, s.design.label())

    return SearchResult(
        pdd=tuple(_distinct(sorted(found[PDD], key=rank))),
        baseline=tuple(_distinct(sorted(found[SAME_DC], key=rank))),
        rejected=tuple(rejected),
        evaluated=len(skeletons),
        colocated=tuple(_distinct(sorted(found[COLOCATED], key=rank))),
    )


def all_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    """Every design family the planner compares, under the same shape and chip rules."""
    return (
        _pdd_skeletons(ev, inputs)
        + _baseline_skeletons(ev, inputs)
        + _colocated_skeletons(ev, inputs)
    )


def _distinct(scored: list[Scored]) -> list[Scored]:
    seen: set[str] = set()
    kept = []
    for s in scored:
        key = s.design.label() + repr(s.design.table)
        if key not in seen:
            seen.add(key)
            kept.append(s)
    return kept


def choice(
    site: str, chip: str, role: Role, shape: InstanceShape, instances: int = 1
) -> PoolChoice:
    """A pool of ``instances`` instances of ``shape``."""
    return PoolChoice(site, chip, role, instances, shape.tp, shape.pp, shape.dp, shape.ep)


def _pdd_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    settings = inputs.settings
    skeletons = []
    for p_site, md_site in _placements(inputs):
        for p_cand in inputs.candidates_for(Role.PREFILL, p_site):
            p_shapes = shape_options(ev, inputs, p_cand.chip, Role.PREFILL)
            for md_cand in inputs.candidates_for(Role.MAIN_DECODE, md_site):
                md_shapes = shape_options(ev, inputs, md_cand.chip, Role.MAIN_DECODE)
                for rld_cand in inputs.candidates_for(Role.RELAY_DECODE, p_site):
                    rld_shapes = shape_options(ev, inputs, rld_cand.chip, Role.RELAY_DECODE)
                    if not rld_shapes:
                        continue
                    pool = choice(p_site, rld_cand.chip, Role.RELAY_DECODE, rld_shapes[0])
                    relays: list[tuple[PoolChoice | None, RldMode]] = [(pool, RldMode.POOL)]
                    if rld_cand.chip == p_cand.chip:
                        relays.append((None, RldMode.SHARED))
                    for (relay, mode), p_shape in itertools.product(relays, p_shapes):
                        for md_shape in md_shapes:
                            for budget in settings.transfer_budgets_s:
                                for smin in settings.singular_min_inputs:
                                    table = replace(
                                        inputs.table,
                                        transfer_budget_s=budget,
                                        singular_min_input_tokens=smin,
                                    )
                                    skeletons.append(
                                        Design(
                                            PDD,
                                            choice(p_site, p_cand.chip, Role.PREFILL, p_shape),
                                            choice(
                                                md_site, md_cand.chip, Role.MAIN_DECODE, md_shape
                                            ),
                                            relay,
                                            table,
                                            mode,
                                        )
                                    )
    return skeletons


def _baseline_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    """Homogeneous same-dc designs: one chip type for P and D, in one site with RDMA."""
    skeletons = []
    rdma_sites = {lk.source_site for lk in inputs.links if lk.kind is LinkKind.RDMA}
    seen: set[tuple[str, str]] = set()
    for cand in inputs.candidates:
        key = (cand.site, cand.chip)
        if key in seen or cand.site not in rdma_sites or cand.chip not in inputs.chips:
            continue
        seen.add(key)
        for p_shape in shape_options(ev, inputs, cand.chip, Role.PREFILL):
            for d_shape in shape_options(ev, inputs, cand.chip, Role.MAIN_DECODE):
                skeletons.append(
                    Design(
                        SAME_DC,
                        choice(cand.site, cand.chip, Role.PREFILL, p_shape),
                        choice(cand.site, cand.chip, Role.MAIN_DECODE, d_shape),
                        None,
                        inputs.table,
                    )
                )
    return skeletons


def _colocated_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    """Aggregated designs: one chip type, every instance serving both phases, in one site."""
    skeletons = []
    seen: set[tuple[str, str]] = set()
    for cand in inputs.candidates:
        key = (cand.site, cand.chip)
        if key in seen or cand.chip not in inputs.chips:
            continue
        seen.add(key)
        shapes = shape_options(ev, inputs, cand.chip, Role.PREFILL)
        shapes += shape_options(ev, inputs, cand.chip, Role.MAIN_DECODE)
        for shape in dict.fromkeys(shapes):
            skeletons.append(
                Design(
                    COLOCATED,
                    choice(cand.site, cand.chip, Role.PREFILL, shape),
                    choice(cand.site, cand.chip, Role.MAIN_DECODE, shape, 0),
                    None,
                    inputs.table,
                )
            )
    return skeletons
