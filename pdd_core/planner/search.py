"""Size every family's skeletons with the analytic model and build the fronts to simulate.

Each skeleton (``planner.skeletons``: chips, shapes, table) is *sized*: each pool starts at the
smallest count that keeps its stage below its utilisation target, then the pool behind the first
violation grows until the analytic SLA holds (or the site's chip limit stops it). Then
``planner.front`` enumerates counts around every skeleton's size, the front the simulated search
walks. Designs are ranked cheapest first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pdd_core.planner.capacity import Constraint, Evaluation, Evaluator
from pdd_core.planner.design import COLOCATED, FAMILIES, HETERO, PDD, SAME_DC, Design
from pdd_core.planner.front import Member, family_front
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.skeletons import all_skeletons
from pdd_core.planner.stages import evaluate
from pdd_core.specs import SLA, Role

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
    first = evaluate(ev, skeleton)
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
        over = inputs.over_limit(design)
        if over:
            return None, f"{design.label()}: {over} ({last or 'capacity'})", start
        evaluation = evaluate(ev, design)
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


def _distinct(scored: list[Scored]) -> list[Scored]:
    seen: set[str] = set()
    kept = []
    for s in scored:
        key = s.design.label() + repr(s.design.table)
        if key not in seen:
            seen.add(key)
            kept.append(s)
    return kept
