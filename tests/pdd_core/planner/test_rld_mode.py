"""RLD as a thin slice: its own pool, or decode slots time-shared on the P instances."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pdd_core.planner import inputs_from_scenario, prepare
from pdd_core.planner.design import PDD
from pdd_core.scenario import load_scenario
from pdd_core.sim import simulate
from pdd_core.specs import RldMode, Role, SpecError, Topology

SCENARIOS = Path(__file__).resolve().parents[3] / "fixtures" / "scenarios"


def test_shared_relay_decodes_on_the_prefill_instances() -> None:
    scenario = load_scenario(SCENARIOS / "small.toml")
    pools = tuple(p for p in scenario.pdd.pools if p.role is not Role.RELAY_DECODE)
    shared = replace(scenario.pdd, pools=pools, rld_mode=RldMode.SHARED)
    requests = scenario.workload.requests()
    result = simulate(
        shared,
        "pdd",
        requests,
        model_id=scenario.model_id,
        sla=scenario.sla,
        table=scenario.table,
        config=scenario.config,
        prices=scenario.prices,
    )
    relayed = [r for r in result.records if r.pipeline in ("P-RLD-MD", "P-RLD")]
    assert relayed
    assert sum(r.tokens_rld for r in relayed) > 0
    # No RLD pool, so the shared design costs exactly its P and MD pools.
    assert result.summary.cost_per_hour == shared.cost_per_hour()
    assert shared.cost_per_hour() < scenario.pdd.cost_per_hour()


def test_rld_mode_is_validated() -> None:
    scenario = load_scenario(SCENARIOS / "small.toml")
    with pytest.raises(SpecError) as info:
        Topology(sites=scenario.pdd.sites, rld_mode="half")  # type: ignore[arg-type]
    assert info.value.field == "rld_mode"


def test_the_search_tries_both_relay_modes() -> None:
    inputs = inputs_from_scenario(load_scenario(SCENARIOS / "small.toml"))
    found = prepare(inputs).found
    modes = {s.design.rld_mode for s in found.pdd if s.design.policy == PDD}
    assert modes == {RldMode.POOL, RldMode.SHARED}
    shared = [s.design for s in found.pdd if s.design.rld_mode is RldMode.SHARED]
    assert all(d.relay is None for d in shared)
    assert all(Role.RELAY_DECODE not in {p.role for p in d.pools} for d in shared)


def test_reference_scenario_runs_its_relay_on_p() -> None:
    scenario = load_scenario(SCENARIOS / "pdd_reference.toml")
    assert scenario.pdd.rld_mode is RldMode.SHARED
    assert [p.role for p in scenario.pdd.pools] == [Role.PREFILL, Role.MAIN_DECODE]
