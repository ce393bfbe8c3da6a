"""``pdd plan``: JSON keys, the text sections, ``--out``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pdd_core.cli import main

SCENARIOS = Path(__file__).resolve().parents[3] / "fixtures" / "scenarios"
SMALL = str(SCENARIOS / "small.toml")


def test_plan_json_has_the_issue_keys(capsys: Any, tmp_path: Path) -> None:
    assert main(["plan", SMALL, "--json", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"pools", "routing_table", "predicted", "baseline", "bathtub", "reasons"} <= set(printed)
    stored = json.loads((tmp_path / "plan.json").read_text())
    assert stored["pools"] == printed["pools"]


def test_plan_text_prints_pools_costs_reasons_bathtub_and_time(capsys: Any) -> None:
    assert main(["plan", SMALL]) == 0
    out = capsys.readouterr().out
    for section in ("pool    site", "cost table", "reasons:", "bathtub:", "<- current workload",
                    "wall time"):  # fmt: skip
        assert section in out


def test_infeasible_scenario_exits_1(capsys: Any, tmp_path: Path) -> None:
    text = (
        Path(SMALL)
        .read_text()
        .replace("ttft_p90_s = 2.0\nttft_p99_s = 5.0", "ttft_p90_s = 0.05\nttft_p99_s = 0.1")
    )
    scenario = tmp_path / "tight.toml"
    scenario.write_text(text)
    assert main(["plan", str(scenario)]) == 1
    assert "INFEASIBLE: TTFT P" in capsys.readouterr().out


MOONCAKE = str(SCENARIOS / "mooncake_conversation.toml")
SAMPLE = str(SCENARIOS.parent / "traces" / "mooncake_conversation_sample.jsonl")


def test_mooncake_plan_prints_its_verdict_and_reasons(capsys: Any) -> None:
    # Issue 12: on the Mooncake conversation trace the verdict is printed, whatever it is (the
    # 200-request sample here; the scenario's default is the full trace, see bench/).
    assert main(["plan", MOONCAKE, "--trace", SAMPLE]) == 0
    out = capsys.readouterr().out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert verdict.startswith(
        ("verdict: PDD pays here", "verdict: PDD does not", "verdict: Within noise")
    )
    for section in ("recommended: ", "reasons:", "design family", "PDD pays"):
        assert section in out
