"""Every shape a scenario or a plan uses obeys the rules of ``specs.shape`` (issue 12, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pdd_core.planner import inputs_from_scenario, prepare
from pdd_core.planner.search import all_skeletons
from pdd_core.scenario import load_scenario
from pdd_core.specs import (
    InstanceShape,
    ShapeError,
    ShapeRule,
    check_shape,
    load_chips,
    load_models,
)

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "fixtures" / "scenarios").glob("*.toml"))
CHIPS = load_chips()
MODELS = load_models()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_scenario_pool_has_a_valid_shape(path: Path) -> None:
    scenario = load_scenario(path)
    model = MODELS[scenario.model_id]
    pools = [*scenario.pdd.pools, *scenario.baseline.pools]
    assert pools
    for pool in pools:
        check_shape(model, CHIPS[pool.chip], pool.shape)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_design_the_planner_searches_has_valid_shapes(path: Path) -> None:
    inputs = inputs_from_scenario(load_scenario(path))
    prepared = prepare(inputs)
    designs = all_skeletons(prepared.evaluator, inputs)
    found = prepared.found
    designs += [s.design for s in (*found.pdd, *found.baseline, *found.colocated)]
    assert designs
    for design in designs:
        for pool in design.pools:
            check_shape(inputs.model, inputs.chips[pool.chip], pool.shape)


def test_reference_plan_pools_have_valid_shapes(reference_plan: Any) -> None:
    model = MODELS["ref-1t-mla"]
    for pool in reference_plan.pools:
        shape = InstanceShape(tp=pool.tp, pp=pool.pp, dp=pool.dp, ep=pool.ep)
        check_shape(model, CHIPS[pool.chip], shape)
        assert pool.chips == pool.instances * shape.chips


def test_a_scenario_with_an_invalid_shape_is_refused_naming_the_rule(tmp_path: Path) -> None:
    source = (SCENARIOS[0].parent / "small.toml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(source.replace("tp = 8\npp = 2", "tp = 16", 1), encoding="utf-8")
    with pytest.raises(ShapeError) as info:
        load_scenario(bad)
    assert info.value.rule is ShapeRule.TP_DOMAIN
    assert str(info.value).startswith("shape: bad.toml: [[pools]] pool dc-a/P/h800: tp 16")
