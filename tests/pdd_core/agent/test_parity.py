"""``pdd parity``: the live plane mirrors the scenario's topology, and the table compares."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pdd_core.agent.config import config_from_dict
from pdd_core.agent.parity import Side, plane_topology, table
from pdd_core.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "fixtures" / "scenarios"


def test_the_live_plane_has_the_scenarios_pools_line_table_and_sla() -> None:
    scenario = load_scenario(SCENARIOS / "parity.toml")

    raw = plane_topology(scenario, payload_scale=0.001)
    config = config_from_dict(raw)

    assert [(a.role, a.site) for a in config.agents] == [
        ("gateway", "dc-a"), ("prefill", "dc-a"), ("relay", "dc-a"), ("main", "dc-b"),
    ]  # fmt: skip
    assert dict(config.engine.chips) == {"prefill": "h800", "relay": "h800", "main": "h20"}
    assert config.engine.tp == 8
    assert config.wan.bandwidth_gbps == pytest.approx(25 * 0.001)
    assert config.wan.rtt_ms == 10
    assert config.routing == scenario.table
    assert config.sla == scenario.sla


def test_a_scenario_with_pipeline_parallel_pools_is_refused() -> None:
    scenario = load_scenario(SCENARIOS / "small.toml")

    with pytest.raises(ValueError, match="pp=2"):
        plane_topology(scenario)


def test_the_table_gives_ratios_and_point_differences() -> None:
    sim = Side(10, 10, (0.2, 0.4, 0.8), 0.01, {"P-MD": 0.9, "P-RLD-MD": 0.1, "P-RLD": 0.0},
               0.05, 2e9)  # fmt: skip
    live = Side(10, 10, (0.3, 0.4, 1.6), 0.02, {"P-MD": 0.8, "P-RLD-MD": 0.2, "P-RLD": 0.0},
                0.1, 3e9)  # fmt: skip

    lines = table(sim, live).splitlines()

    assert lines[2].split()[-1] == "1.50x"
    assert lines[3].split()[-1] == "1.00x"
    assert lines[6].split()[-2:] == ["-10.0", "pt"]
    assert not math.isnan(float(lines[-1].split()[-1].rstrip("x")))
