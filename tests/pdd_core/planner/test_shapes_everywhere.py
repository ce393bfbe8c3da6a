"""Every shape a scenario, a plan, the demo topology or a data-plane fixture uses obeys the rules
of ``specs.shape`` (issue 12, item 1): the scenarios' pools, every design the planner searches,
every pool of every plan it returns for every scenario (and of the baseline it compares with),
``fixtures/demo/topology.json`` and the engine shape of every ``fixtures/dataplane`` file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.config import ConfigError, config_from_dict, load_config
from pdd_core.planner import Plan, inputs_from_scenario, make_plan, prepare
from pdd_core.planner.skeletons import all_skeletons
from pdd_core.scenario import load_scenario
from pdd_core.specs import (
    InstanceShape,
    ShapeError,
    ShapeRule,
    check_shape,
    load_chips,
    load_models,
    load_topology,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SCENARIOS = sorted((FIXTURES / "scenarios").glob("*.toml"))
DATAPLANE = sorted((FIXTURES / "dataplane").glob("*.json"))
DEMO_TOPOLOGY = FIXTURES / "demo" / "topology.json"
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


def _pool_shape(pool: Any) -> InstanceShape:
    return InstanceShape(tp=pool["tp"], pp=pool["pp"], dp=pool["dp"], ep=pool["ep"])


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_plan_of_every_scenario_has_valid_shapes(
    path: Path, request: pytest.FixtureRequest
) -> None:
    if path.stem == "pdd_reference":
        plan = request.getfixturevalue("reference_plan")  # planned once per session
    else:
        # Shapes, not the verdict's statistics: the search alone (capacity_seeds = 0), and the
        # Mooncake scenario on its 200-request sample rather than the whole trace.
        sample = FIXTURES / "traces" / "mooncake_conversation_sample.jsonl"
        trace = sample if path.stem == "mooncake_conversation" else None
        inputs = inputs_from_scenario(load_scenario(path, trace=trace))
        plan = make_plan(replace(inputs, settings=replace(inputs.settings, capacity_seeds=0)))
    assert isinstance(plan, Plan)
    model = MODELS[plan.model]
    pools = [p.to_dict() for p in plan.pools] + list(plan.baseline.get("pools", []))
    assert pools
    for pool in pools:
        shape = _pool_shape(pool)
        check_shape(model, CHIPS[pool["chip"]], shape)
        assert pool["instances"] * shape.chips == pool.get("chips", pool["instances"] * shape.chips)


def test_the_demo_topology_has_valid_shapes() -> None:
    topology = load_topology(DEMO_TOPOLOGY)
    assert topology.pools
    for pool in topology.pools:
        check_shape(MODELS[pool.model], CHIPS[pool.chip], pool.shape)


def test_a_topology_file_with_an_invalid_shape_is_refused_naming_the_rule(tmp_path: Path) -> None:
    raw = json.loads(DEMO_TOPOLOGY.read_text(encoding="utf-8"))
    for pool in raw["pools"]:
        pool.pop("pp", None)  # DeepSeek-V3 on one 8 x H800 node
    bad = tmp_path / "topology.json"
    bad.write_text(json.dumps(raw), encoding="utf-8")

    with pytest.raises(ShapeError) as info:
        load_topology(bad)

    assert info.value.rule is ShapeRule.WEIGHTS_FIT
    assert "pool dc-a/P/h800" in str(info.value)


@pytest.mark.parametrize("path", DATAPLANE, ids=lambda p: p.stem)
def test_every_dataplane_fixture_runs_a_valid_instance_shape(path: Path) -> None:
    config = load_config(path)
    engine = config.engine
    if engine.kind != "timed":
        # tiny and llama.cpp run one process on the host, not a catalog chip: one chip, no split.
        assert engine.shape == InstanceShape()
        return
    roles = {a.role for a in config.agents} - {"gateway"}
    assert roles == set(engine.chips)
    for role in roles:
        check_shape(MODELS[engine.model], CHIPS[engine.chips[role]], engine.shape)


def _timed_raw() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((FIXTURES / "dataplane" / "timed.json").read_text("utf-8"))
    return raw


def test_a_dataplane_config_accepts_pp_dp_and_ep() -> None:
    raw = _timed_raw()
    raw["engine"].update(model="qwen3-235b-a22b", tp=4, pp=1, dp=2, ep=8)

    config = config_from_dict(raw)

    assert config.engine.shape == InstanceShape(tp=4, dp=2, ep=8)


def test_a_dataplane_config_with_an_invalid_shape_is_refused_naming_role_chip_and_rule() -> None:
    raw = _timed_raw()
    raw["engine"].pop("pp")  # DeepSeek-V3 on one 8 x H800 node

    with pytest.raises(ConfigError) as info:
        config_from_dict(raw)

    message = str(info.value)
    assert message.startswith("engine: prefill on h800: tp8 is not a valid instance of deepseek-v3")
    assert message.endswith("[rule weights-fit-hbm]")


def test_a_dataplane_config_with_impossible_degrees_is_refused() -> None:
    raw = _timed_raw()
    raw["engine"]["tp"] = 16  # beyond H800's 8-chip NVLink domain

    with pytest.raises(ConfigError, match=r"\[rule tp-within-scaleup-domain\]"):
        config_from_dict(raw)
