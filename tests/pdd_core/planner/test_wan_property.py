"""More WAN bandwidth never lowers a planned design's capacity goodput once its routing table is
re-tuned for the line, the way the planner tunes it (issue 12's property, fidelity item 1).

The designs are the small scenario's: the planner's best PDD design, and the design whose fixed
table showed the opposite (RLD an H800 x 16 instance, MD one H20 x 8: a faster line sends more
requests P-MD to the weaker MD). Capacity is the simulator's (``find_capacity``), seeded, so the
comparison is exact.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pdd_core.planner import PlannerInputs, prepare
from pdd_core.planner.design import PDD, Design
from pdd_core.planner.skeletons import choice
from pdd_core.planner.tuning import (
    candidate_tables,
    design_capacity,
    evaluator_for,
    tune_routing,
    with_wan_bandwidth,
)
from pdd_core.specs import InstanceShape, LinkKind, RldMode, Role

BANDWIDTHS_GBPS = (5.0, 10.0, 20.0, 40.0)


def _relay_pool_design(inputs: PlannerInputs) -> Design:
    return Design(
        PDD,
        choice("dc-a", "h800", Role.PREFILL, InstanceShape(tp=8, pp=2)),
        choice("dc-b", "h20", Role.MAIN_DECODE, InstanceShape(tp=8)),
        choice("dc-a", "h800", Role.RELAY_DECODE, InstanceShape(tp=8, pp=2)),
        inputs.table,
        RldMode.POOL,
    )


@pytest.fixture(scope="module")
def inputs(small_inputs: PlannerInputs) -> PlannerInputs:
    # One singular threshold keeps the test small: six candidate tables per line, not eleven.
    return replace(
        small_inputs, settings=replace(small_inputs.settings, singular_min_inputs=(32_768,))
    )


@pytest.fixture(scope="module")
def designs(small_inputs: PlannerInputs) -> dict[str, Design]:
    planned = prepare(small_inputs).found.pdd[0].design
    return {"planned": planned, "relay-pool": _relay_pool_design(small_inputs)}


# The small scenario's generated sessions run closed loop by default (a turn after its
# predecessor's answer); both arrival models are held to the property.
@pytest.mark.parametrize(
    ("name", "closed_loop"),
    [
        ("planned", True),
        ("planned", False),
        ("relay-pool", False),
        ("relay-pool", True),
    ],
)
def test_more_wan_bandwidth_never_lowers_capacity_with_retuned_routing(
    inputs: PlannerInputs, designs: dict[str, Design], name: str, closed_loop: bool
) -> None:
    inputs = replace(inputs, config=replace(inputs.config, closed_loop=closed_loop))
    profile = prepare(inputs).profile
    previous = 0.0
    for gbps in BANDWIDTHS_GBPS:
        on_line = with_wan_bandwidth(inputs, gbps)
        tuned = tune_routing(on_line, designs[name], evaluator_for(on_line, profile))

        assert tuned.capacity.goodput_rps >= previous, (name, gbps, tuned.reason)
        assert tuned.capacity.goodput_rps == max(goodput for _, goodput in tuned.candidates)
        previous = tuned.capacity.goodput_rps
    assert previous > 0


def test_a_fixed_table_can_lose_capacity_on_a_faster_line(
    small_inputs: PlannerInputs, designs: dict[str, Design]
) -> None:
    # Why the table is re-tuned: with a 2 s budget nearly every request goes P-MD on a 40 Gbps
    # line, and the one H20 x 8 MD decodes them all; on 10 Gbps most relay through the H800 RLD.
    design = designs["relay-pool"]
    fixed = replace(design, table=replace(design.table, transfer_budget_s=2.0))

    slow = design_capacity(with_wan_bandwidth(small_inputs, 10.0), fixed).goodput_rps
    fast = design_capacity(with_wan_bandwidth(small_inputs, 40.0), fixed).goodput_rps

    assert fast < slow


def test_candidates_are_the_design_table_then_the_planner_budgets(
    small_inputs: PlannerInputs, designs: dict[str, Design]
) -> None:
    design = designs["planned"]
    settings = small_inputs.settings

    tables = candidate_tables(small_inputs, design)

    assert tables[0] == design.table
    pairs = {(t.transfer_budget_s, t.singular_min_input_tokens) for t in tables[1:]}
    wanted = {(b, s) for b in settings.transfer_budgets_s for s in settings.singular_min_inputs}
    assert pairs | {(design.table.transfer_budget_s, design.table.singular_min_input_tokens)} >= (
        wanted
    )


def test_with_wan_bandwidth_changes_only_the_wan_lines(small_inputs: PlannerInputs) -> None:
    faster = with_wan_bandwidth(small_inputs, 80.0)

    for before, after in zip(small_inputs.links, faster.links, strict=True):
        if before.kind is LinkKind.WAN:
            assert after == replace(before, bandwidth_gbps=80.0)
        else:
            assert after == before
