"""``pdd compare`` states the SLA and the offered rate, and explains a fixed-load goodput above
the capacity goodput (issue 12, fidelity item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_core.cli import main
from pdd_core.cli.compare import capacity_note, sla_line
from pdd_core.scenario import load_scenario
from pdd_core.sim.capacity import offered_rps

SMALL = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" / "small.toml"


def test_compare_prints_the_sla_and_the_offered_rate_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario = load_scenario(SMALL)
    requests = scenario.workload.requests()

    assert main(["compare", str(SMALL), "--no-capacity"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == sla_line(scenario.sla)
    assert lines[0].startswith(
        f"SLA: TTFT P90 <= {scenario.sla.ttft_p90_s:g} s, P99 <= {scenario.sla.ttft_p99_s:g} s; "
        f"TPOT P90 <= {scenario.sla.tpot_p90_s * 1e3:g} ms"
    )
    assert lines[1].startswith(
        f"offered load: {len(requests):,} requests at {offered_rps(requests):.3g} req/s"
    )


def test_compare_json_carries_the_sla_and_the_offered_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario = load_scenario(SMALL)
    requests = scenario.workload.requests()

    assert main(["compare", str(SMALL), "--json", "--no-capacity"]) == 0

    payload = json.loads(capsys.readouterr().out)
    assert payload["sla"] == {
        "ttft_p90_s": scenario.sla.ttft_p90_s,
        "ttft_p99_s": scenario.sla.ttft_p99_s,
        "tpot_p90_s": scenario.sla.tpot_p90_s,
        "tpot_p99_s": scenario.sla.tpot_p99_s,
    }
    assert payload["offered_rps"] == pytest.approx(offered_rps(requests))
    assert payload["requests"] == len(requests)


def _capacity(*, factor: float, goodput: float, own_met: bool) -> dict[str, object]:
    return {
        "goodput_rps": goodput,
        "session_factor": factor,
        "probes": [
            {
                "factor": 1.0,
                "offered_rps": 0.7,
                "requests": 150,
                "sla_met": own_met,
                "violated": "" if own_met else "ttft_p90",
                "attainment": 0.86,
            },
            {
                "factor": factor,
                "offered_rps": goodput,
                "requests": 100,
                "sla_met": True,
                "violated": "",
                "attainment": 0.97,
            },
        ],
    }


def test_no_note_when_capacity_is_at_least_the_fixed_load_goodput() -> None:
    assert capacity_note("pdd", 0.5, _capacity(factor=1.0, goodput=0.7, own_met=True)) == ""
    assert capacity_note("pdd", 0.5, _capacity(factor=0.7, goodput=0.5, own_met=False)) == ""


def test_note_says_the_own_load_missed_the_sla_while_most_requests_met_their_targets() -> None:
    note = capacity_note("same-dc", 0.6, _capacity(factor=0.5, goodput=0.35, own_met=False))

    assert note == (
        "same-dc: fixed-load goodput 0.6 req/s exceeds its capacity 0.35 req/s because the "
        "scenario's own load (0.7 req/s) misses the SLA (ttft_p90 over its target) while 86% "
        "of its requests still met their own targets and count as good; capacity asks for the "
        "SLA over the whole run, which held only up to x0.5 the sessions."
    )
