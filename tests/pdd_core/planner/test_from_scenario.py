"""The ``[planner]`` table of scenario files: candidates, settings, defaults, errors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pdd_core.planner import CandidateChip, inputs_from_scenario
from pdd_core.planner.reasons import arrivals_sentence
from pdd_core.scenario import load_scenario
from pdd_core.specs import Role

SCENARIOS = Path(__file__).resolve().parents[3] / "fixtures" / "scenarios"


def _with_planner(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text((SCENARIOS / "small.toml").read_text() + "\n" + table)
    return path


def test_reference_candidates_and_settings() -> None:
    inputs = inputs_from_scenario(load_scenario(SCENARIOS / "pdd_reference.toml"))
    assert inputs.candidates == (
        CandidateChip("dc-a", "gpu-a", 256, (Role.PREFILL, Role.RELAY_DECODE)),
        CandidateChip("dc-b", "gpu-b", 128, (Role.MAIN_DECODE,)),
    )
    assert inputs.settings.simulations == 12
    assert inputs.seed == 7


def test_without_a_planner_table_the_pools_chips_are_candidates() -> None:
    inputs = inputs_from_scenario(load_scenario(SCENARIOS / "small.toml"))
    assert inputs.candidates == (
        CandidateChip("dc-a", "h800", 4 * (16 + 16 + 16 + 16),
                      (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE)),
        CandidateChip("dc-b", "h20", 4 * 8, (Role.MAIN_DECODE,)),
    )  # fmt: skip


def test_unknown_planner_key_is_named(tmp_path: Path) -> None:
    scenario = load_scenario(_with_planner(tmp_path, "[planner]\nverfy = 3\n"))
    with pytest.raises(ValueError, match="\\[planner\\] unknown key 'verfy'"):
        inputs_from_scenario(scenario)


def test_unknown_candidate_chip_is_named(tmp_path: Path) -> None:
    table = '[[planner.candidates]]\nsite = "dc-a"\nchip = "nope"\nmax_chips = 8\n'
    scenario = load_scenario(_with_planner(tmp_path, table))
    with pytest.raises(ValueError, match="#1 chip: unknown catalog chip 'nope'"):
        inputs_from_scenario(scenario)


def test_candidate_limit_must_be_positive(tmp_path: Path) -> None:
    table = '[[planner.candidates]]\nsite = "dc-a"\nchip = "h800"\nmax_chips = 0\n'
    scenario = load_scenario(_with_planner(tmp_path, table))
    with pytest.raises(ValueError, match="max_chips"):
        inputs_from_scenario(scenario)


def test_the_plan_says_which_arrival_model_it_ran() -> None:
    scenario = load_scenario(SCENARIOS / "small.toml")
    generated = inputs_from_scenario(scenario)
    assert generated.config.closed_loop is True
    assert arrivals_sentence(generated).startswith(
        "arrivals closed loop: a session's next turn arrives after its previous answer plus "
        "the generator's tool/think time (exponential, mean 4 s,"
    )
    trace = inputs_from_scenario(scenario, scenario.workload.requests(), closed_loop=False)
    assert trace.config == replace(generated.config, closed_loop=False)
    assert arrivals_sentence(trace).startswith(
        "arrivals open loop: every request at the recorded trace's arrival time"
    )
