"""Search the design space with the analytic model: chips, shapes, counts, thresholds.

Every family is built under the same rules: PDD (every placement DOMAIN.md's pipeline allows,
P and RLD in one site, MD in another joined by a WAN line), homogeneous same-dc (P and D of one
chip in one site with RDMA), heterogeneous same-dc (two chips of one site) and aggregated (one
chip, every instance both phases, each chunk budget of the settings). Each skeleton (chips,
shapes, table) is *sized*: each pool starts at the smallest count that keeps its stage below its
utilisation target, then the pool behind the first violation grows until the analytic SLA holds
(or the site's chip limit stops it). Then ``planner.front`` enumerates counts around every
skeleton's size, the front the simulated search walks. Designs are ranked cheapest first.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pdd_core.planner.capacity import Constraint, Evaluation, Evaluator
from pdd_core.planner.design import COLOCATED, FAMILIES, HETERO, PDD, SAME_DC, Design, PoolChoice
from pdd_core.planner.front import Member, family_front
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
    """Ranked feasible designs (best first), and why the others were dropped.

    ``baseline`` is the homogeneous same-dc family, ``hetero`` the two-chip same-dc one;
    ``fronts`` holds each family's analytic front (``planner.front``) for the simulated search.
    """

    pdd: tuple[Scored, ...]
    baseline: tuple[Scored, ...]
    rejected: tuple[str, ...]
    evaluated: int
    colocated: tuple[Scored, ...] = ()
    hetero: tuple[Scored, ...] = ()
    fronts: Mapping[str, tuple[Member, ...]] = field(default_factory=dict)

    def ranked(self, family: str) -> tuple[Scored, ...]:
        """The analytically feasible sized designs of one family, cheapest first."""
        if family == PDD:
            return self.pdd
        if family == COLOCATED:
            return self.colocated
        if family == HETERO:
            return self.hetero
        return self.baseline

    def front(self, family: str) -> tuple[Member, ...]:
        """The family's enumerated front (empty when the family does not apply)."""
        return tuple(self.fronts.get(family, ()))

    def any_feasible(self) -> bool:
        """Whether any family has a design the simulator could confirm."""
        return any(self.fronts.get(f) for f in FAMILIES) or bool(
            self.pdd or self.baseline or self.colocated or self.hetero
        )


def shape_options(
    ev: Evaluator, inputs: PlannerInputs, chip: str, role: Role, keep: int | None = None
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


def fits(inputs: PlannerInputs, design: Design) -> str | None:
    """Why ``design`` exceeds a site's chip limit, or None when it fits."""
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
    scored, why, _ = sized_or_start(ev, inputs, skeleton)
    return scored, why


def start_counts(ev: Evaluator, skeleton: Design) -> Design:
    """``skeleton`` with each pool at the count that keeps its stage at its sizing target."""
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
    return design


def sized_or_start(
    ev: Evaluator, inputs: PlannerInputs, skeleton: Design
) -> tuple[Scored | None, str, Design]:
    """``size_design``, and the starting design (the front's base when sizing fails)."""
    design = start = start_counts(ev, skeleton)
    last = ""
    for _ in range(64):
        over = fits(inputs, design)
        if over:
            return None, f"{design.label()}: {over} ({last or 'capacity'})", start
        evaluation = ev.evaluate(design)
        if evaluation.meets_sla:
            return Scored(design, evaluation), "", start
        last = "; ".join(v.text for v in evaluation.violations)
        grow = _grow(design, evaluation, inputs.sla)
        if grow is None:
            return None, f"{design.label()}: {last}", start
        design = grow
    return None, f"{design.label()}: {last}", start


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
    """Size every skeleton, build each family's front, and say why the rest failed."""
    skeletons = all_skeletons(ev, inputs)
    found: dict[str, list[Scored]] = {f: [] for f in FAMILIES}
    starts: dict[str, list[Design]] = {f: [] for f in FAMILIES}
    rejected: list[str] = []
    for index, skeleton in enumerate(skeletons):
        scored, why, start = sized_or_start(ev, inputs, skeleton)
        if scored is None:
            rejected.append(f"{skeleton.family}: {why}")
            if skeleton.table == inputs.table:
                starts[skeleton.family].append(start)
        else:
            found[skeleton.family].append(scored)
        if progress is not None:
            progress(0.8 * (index + 1) / len(skeletons))

    def rank(s: Scored) -> tuple[float, float, str]:
        # The cheapest design that meets the SLA; at equal cost the one with more goodput.
        return (s.evaluation.cost_per_hour, -s.evaluation.bcr, s.design.label())

    ranked = {f: tuple(_distinct(sorted(found[f], key=rank))) for f in FAMILIES}
    fronts = {}
    for family in FAMILIES:
        bases = _front_bases(ranked[family], starts[family])
        cheapest = ranked[family][0].evaluation.cost_per_hour if ranked[family] else None
        fronts[family] = family_front(ev, inputs, bases, cheapest)
    if progress is not None:
        progress(1.0)
    return SearchResult(
        pdd=ranked[PDD],
        baseline=ranked[SAME_DC],
        rejected=tuple(rejected),
        evaluated=len(skeletons),
        colocated=ranked[COLOCATED],
        hetero=ranked[HETERO],
        fronts=fronts,
    )


def _front_bases(sized: Sequence[Scored], starts: Sequence[Design]) -> list[Design]:
    """One base per shape combination: its cheapest sized design (the table that sized it
    cheapest), else its starting counts with the scenario's table."""
    bases: dict[tuple[object, ...], Design] = {}
    for scored in sized:  # cheapest first
        bases.setdefault(shape_key(scored.design, table=False), scored.design)
    for start in starts:
        bases.setdefault(shape_key(start, table=False), start)
    return list(bases.values())


def shape_key(design: Design, *, table: bool = True) -> tuple[object, ...]:
    """A design without its instance counts: what adding or removing an instance keeps."""
    pools = tuple(
        (p.role, p.chip, p.site, p.shape, p.chunk_tokens)
        for p in design.pools
        if p.role is not Role.RELAY_DECODE
    )
    relay = design.relay.shape if design.relay is not None else None
    key: tuple[object, ...] = (design.policy, pools, relay, design.rld_mode)
    return (*key, design.table) if table else key


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
    """Same-dc designs in one site with RDMA: homogeneous (one chip for P and D) and, where the
    site offers more than one chip, heterogeneous (every ordered pair of two chips)."""
    skeletons = []
    rdma_sites = {lk.source_site for lk in inputs.links if lk.kind is LinkKind.RDMA}
    chips_at: dict[str, list[str]] = {}
    for cand in inputs.candidates:
        if cand.site in rdma_sites and cand.chip in inputs.chips:
            listed = chips_at.setdefault(cand.site, [])
            if cand.chip not in listed:
                listed.append(cand.chip)
    for site, chips in chips_at.items():
        for p_chip, d_chip in itertools.product(chips, chips):
            for p_shape in shape_options(ev, inputs, p_chip, Role.PREFILL):
                for d_shape in shape_options(ev, inputs, d_chip, Role.MAIN_DECODE):
                    skeletons.append(
                        Design(
                            SAME_DC,
                            choice(site, p_chip, Role.PREFILL, p_shape),
                            choice(site, d_chip, Role.MAIN_DECODE, d_shape),
                            None,
                            inputs.table,
                        )
                    )
    return skeletons


def _colocated_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    """Aggregated designs: one chip type, every instance serving both phases, in one site, at
    every chunk budget of the settings (the engine's per-iteration token budget).

    An aggregated design uses no link and is priced by its chip, so the same chip in two sites
    gives the same design: each chip is tried once, in the site that may hold the most of it
    (the first listed on a tie), and the family's simulations are not spent twice on it.
    """
    skeletons = []
    sites: dict[str, str] = {}  # chip -> the site that may hold the most of it
    for cand in inputs.candidates:
        if cand.chip not in inputs.chips:
            continue
        held = sites.get(cand.chip)
        if held is None or inputs.limit(cand.site, cand.chip) > inputs.limit(held, cand.chip):
            sites[cand.chip] = cand.site
    for chip, site in sites.items():
        shapes = shape_options(ev, inputs, chip, Role.PREFILL)
        shapes += shape_options(ev, inputs, chip, Role.MAIN_DECODE)
        for shape in dict.fromkeys(shapes):
            for chunk in inputs.settings.chunk_budgets:
                skeletons.append(
                    Design(
                        COLOCATED,
                        replace(
                            choice(site, chip, Role.PREFILL, shape),
                            chunk_tokens=int(chunk),
                        ),
                        choice(site, chip, Role.MAIN_DECODE, shape, 0),
                        None,
                        inputs.table,
                    )
                )
    return skeletons
