"""The skeletons of every design family: chips, sites, shapes and tables, counts still open.

Every family is built under the same rules from the shapes the screen keeps
(``planner.screen``): PDD (every placement DOMAIN.md's pipeline allows, P and RLD in one site, MD
in another joined by a WAN line, each transfer budget and singular threshold of the settings),
homogeneous same-dc (P and D of one chip in one site with RDMA), heterogeneous same-dc (two chips
of one site) and aggregated (one chip, every instance both phases, each chunk budget of the
settings). ``planner.search`` sizes each skeleton's counts.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from pdd_core.planner.capacity import Evaluator
from pdd_core.planner.design import COLOCATED, PDD, SAME_DC, Design, PoolChoice
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.screen import shape_options
from pdd_core.specs import InstanceShape, LinkKind, RldMode, Role


def placements(inputs: PlannerInputs) -> list[tuple[str, str]]:
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


def all_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    """Every design family the planner compares, under the same shape and chip rules."""
    return (
        _pdd_skeletons(ev, inputs)
        + _baseline_skeletons(ev, inputs)
        + _colocated_skeletons(ev, inputs)
    )


def choice(
    site: str, chip: str, role: Role, shape: InstanceShape, instances: int = 1
) -> PoolChoice:
    """A pool of ``instances`` instances of ``shape``."""
    return PoolChoice(site, chip, role, instances, shape.tp, shape.pp, shape.dp, shape.ep)


def _pdd_skeletons(ev: Evaluator, inputs: PlannerInputs) -> list[Design]:
    settings = inputs.settings
    skeletons = []
    for p_site, md_site in placements(inputs):
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
        if cand.site in rdma_sites and cand.chip in inputs.chips and cand.one_site:
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
        if cand.chip not in inputs.chips or not cand.one_site:
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
