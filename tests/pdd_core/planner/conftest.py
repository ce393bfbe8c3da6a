"""Shared planner inputs: the small scenario (fast) and the reference one (planned once)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdd_core.planner import PlannerInputs, inputs_from_scenario, make_plan
from pdd_core.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "fixtures" / "scenarios"


@pytest.fixture(scope="session")
def small_inputs() -> PlannerInputs:
    return inputs_from_scenario(load_scenario(SCENARIOS / "small.toml"))


@pytest.fixture(scope="session")
def small_plan(small_inputs: PlannerInputs) -> Any:
    return make_plan(small_inputs)


@pytest.fixture(scope="session")
def reference_plan() -> Any:
    # The search alone (about 30 s of CPU): measuring every family's capacity over five
    # workloads costs a minute more and is printed by bench/reproduce_reference.py; the
    # verdict's statistics are tested on the small scenario.
    inputs = inputs_from_scenario(load_scenario(SCENARIOS / "pdd_reference.toml"))
    return make_plan(replace(inputs, settings=replace(inputs.settings, capacity_seeds=0)))
