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


def test_trace_lines_of_every_log_join_into_one_timeline_per_request(tmp_path: Path) -> None:
    from pdd_core.agent.trace import read_marks

    (tmp_path / "gateway.log").write_text(
        "2026-11-30 17:00:00 pdd.trace trace cmpl-1 gateway_received 100.000000\n"
        "2026-11-30 17:00:00 aiohttp.access noise\n"
        "2026-11-30 17:00:01 pdd.trace trace cmpl-1.r1 gateway_routed 100.500000\n"
    )
    (tmp_path / "p-0.log").write_text(
        "x pdd.trace trace cmpl-1 p_prefill_start 100.010000\n"
        "x pdd.trace trace cmpl-1 p_prefill_start 100.900000\n"  # a resume: the first counts
    )

    marks = read_marks(sorted(tmp_path.glob("*.log")))

    assert marks == {
        "cmpl-1": {"gateway_received": 100.0, "gateway_routed": 100.5, "p_prefill_start": 100.01}
    }


def test_a_timeline_puts_the_live_milestones_beside_the_simulated_ones() -> None:
    from pdd_core.agent.parity import timeline
    from pdd_core.agent.replay import Result
    from pdd_core.sim.records import SimulatedRequest

    record = SimulatedRequest(
        id="s0-t1", session="s0", tenant="t", arrival_s=1.0, input_tokens=6000,
        output_tokens=10, pipeline="P-MD", handoff_mode="", hit_tokens_p=4096,
        hit_tokens_md=4096, miss_tokens=1904, queue_s=0.01, prefill_s=0.1, transfer_s=0.2,
        handoff_s=0.0, ttft_s=0.32, tpot_mean_s=0.01, longest_stall_s=0.01, finish_s=1.5,
        wan_bytes=1e8, tokens_rld=0, tokens_md=10, rejected=False, reason="",
    )  # fmt: skip
    result = Result(True, ttft_s=0.4, pipeline="P-MD", request_id="cmpl-1", sent_at=100.0)
    marks = {"gateway_received": 100.002, "p_prefill_start": 100.03, "p_prefill_end": 100.14,
             "md_kv_done": 100.37}  # fmt: skip

    rows = {line[:24].strip(): line[24:].split() for line in
            timeline(record, result, marks).splitlines()[2:]}  # fmt: skip

    assert rows["gateway has the request"] == ["-", "0.002", "s"]
    assert rows["prefill starts"] == ["0.010", "s", "0.030", "s"]
    assert rows["prefill ends"] == ["0.110", "s", "0.140", "s"]
    assert rows["MD has the KV"] == ["0.310", "s", "0.370", "s"]
    assert rows["client first token"] == ["0.320", "s", "0.400", "s"]
    assert "RLD first token" not in rows  # neither side has it
