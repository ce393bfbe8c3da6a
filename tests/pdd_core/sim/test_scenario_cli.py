"""Scenario files and the ``simulate`` / ``compare`` verbs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pdd_core.cli import main
from pdd_core.scenario import load_scenario
from pdd_core.sim import COMPARE_KEYS

ROOT = Path(__file__).resolve().parents[3]
SMALL = ROOT / "fixtures" / "scenarios" / "small.toml"
REFERENCE = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"


def test_reference_scenario_loads_with_the_catalog_chips_and_88_gpu_a_baseline():
    scenario = load_scenario(REFERENCE)
    assert scenario.model_id == "ref-1t-mla"
    assert {p.chip for p in scenario.pdd.pools} == {"gpu-a", "gpu-b"}
    assert (
        sum(
            p.instances * p.chips_per_instance for p in scenario.baseline.pools if p.chip == "gpu-a"
        )
        == 88
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("[routing]", "[routing]\nbogus = 1"), "[routing] unknown key 'bogus'"),
        (("transfer_budget_s = 0.3", "transfer_budget_s = -1"), "[routing] transfer_budget_s"),
        (('model = "deepseek-v3"', 'model = "nope"'), "[scenario] model"),
        (('chip = "h20"', 'chip = "nope"'), "chip: unknown catalog chip 'nope'"),
        (("max_batch = 64", "max_batch = 0"), "[engine] max_batch"),
    ],
)
def test_scenario_errors_name_the_key(tmp_path, edit, message):
    text = SMALL.read_text(encoding="utf-8").replace(*edit, 1)
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_scenario(path)
    assert message in str(info.value)
    assert str(info.value).startswith("bad.toml: ")


def test_compare_json_has_every_policy_and_exactly_the_keys(capsys):
    assert main(["compare", str(SMALL), "--json", "--capacity-iterations", "1"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert list(payload) == [
        "sla",
        "offered_rps",
        "requests",
        "policies",
        "capacity",
        "capacity_notes",
        "searched",
    ]
    # The planner's searched best design of every family, then the hand-written pools, each
    # measured over the same independent workloads.
    labels = [row["label"] for row in payload["searched"]["rows"]]
    assert labels == [
        "searched pdd",
        "searched same-dc",
        "searched same-dc-hetero",
        "searched colocated",
        "hand-written pdd",
        "hand-written same-dc",
        "hand-written colocated",
    ]
    for row in payload["searched"]["rows"]:
        if row["found"] and "capacity" in row:
            cap = row["capacity"]
            assert cap["low_rps"] <= cap["goodput_rps"] <= cap["high_rps"]
    assert list(payload["policies"]) == ["colocated", "same-dc", "naive-cross-dc", "pdd"]
    for row in payload["policies"].values():
        assert tuple(row) == COMPARE_KEYS
    assert list(payload["capacity"]) == ["colocated", "same-dc", "naive-cross-dc", "pdd"]
    for row in payload["capacity"].values():
        assert row["bcr"] == pytest.approx(row["goodput_rps"] / row["cost_per_hour"])
        at = [p for p in row["probes"] if p["factor"] == row["session_factor"] and p["sla_met"]]
        assert row["goodput_rps"] == (at[0]["offered_rps"] if at else 0.0)


def test_compare_without_capacity_prints_fixed_load_figures_only(capsys):
    assert main(["compare", str(SMALL), "--json", "--no-capacity"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert list(payload) == ["sla", "offered_rps", "requests", "policies"]


def test_compare_table_prints_all_policies_with_ratios(capsys):
    assert main(["compare", str(SMALL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SLA: TTFT P90 <= ")
    lines = out.splitlines()
    assert lines[3].startswith("hand-written pools")
    header = lines[4].split()
    assert header == ["colocated", "same-dc", "naive-cross-dc", "pdd"]
    assert "ratios (x) are to same-dc" in out
    assert "capacity goodput (req/s)" in out
    assert "design families, searched by the planner" in out


def test_simulate_writes_results_records_and_an_offline_report(tmp_path, capsys):
    assert main(["simulate", str(SMALL), "--policy", "pdd", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["policy"] == "pdd"
    with (tmp_path / "records.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == results["summary"]["requests"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    # plotly.js is inline (no <script src=...>), so the charts render offline.
    assert "<script src" not in page
    assert len(page) > 1_000_000
    for title in ("TTFT CDF", "Hit-band breakdown", "WAN utilisation", "Pipeline mix", "RLD"):
        assert title in page
    # The summary table: labels with units (no field names), and the trace's own hit rate that
    # results.json has (the report was given the summary before it was filled in).
    trace_hit = results["summary"]["trace_hit_token_weighted"]
    assert trace_hit is not None
    assert f"<tr><th>trace&#x27;s own hit (token-w.)</th><td>{trace_hit:.4g}</td></tr>" in page
    tpot_ms = results["summary"]["tpot_p50"] * 1e3
    assert f"<tr><th>TPOT P50 (ms)</th><td>{tpot_ms:.4g}</td></tr>" in page
    assert "<th>ttft_p50</th>" not in page


def test_simulate_stream_prints_the_same_table_and_writes_records_as_they_end(tmp_path, capsys):
    # Given the list run's figures.
    assert main(["simulate", str(SMALL), "--out", str(tmp_path / "list"), "--no-report"]) == 0
    listed = capsys.readouterr().out.splitlines()
    # When the same run streams, its records to a JSON-lines file.
    records = tmp_path / "records.jsonl"
    argv = ["simulate", str(SMALL), "--out", str(tmp_path / "stream"), "--stream",
            "--records", str(records), "--window-s", "30"]  # fmt: skip
    assert main(argv) == 0
    streamed = capsys.readouterr().out.splitlines()

    # Then the table has the same rows, and the counts agree.
    def rows(lines):
        return {line.split()[0]: line for line in lines if line[:1].islower() and "  " in line}

    assert rows(streamed).keys() == rows(listed).keys()
    for key in ("requests", "served", "rejected", "goodput_rps", "pipeline_mix"):
        assert rows(streamed)[key] == rows(listed)[key]
    summary = json.loads((tmp_path / "stream" / "results.json").read_text())["summary"]
    assert len(records.read_text(encoding="utf-8").splitlines()) == summary["requests"]
    with (tmp_path / "stream" / "windows.csv").open(encoding="utf-8") as fh:
        windows = list(csv.DictReader(fh))
    assert sum(int(w["served"]) + int(w["rejected"]) for w in windows) == summary["requests"]
    assert {float(w["end_s"]) - float(w["start_s"]) for w in windows} == {30.0}
    assert not (tmp_path / "stream" / "report.html").exists()


def test_simulate_records_needs_stream(tmp_path, capsys):
    argv = ["simulate", str(SMALL), "--out", str(tmp_path), "--records", str(tmp_path / "r.csv")]
    assert main(argv) == 2
    assert "--records: only with --stream" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_the_compared_rows_are_the_compared_figures():
    from pdd_core.report import COMPARE_ROWS
    from pdd_core.sim.summary import COMPARE_KEYS

    keys = [key for key, _, _ in COMPARE_ROWS]
    assert len(keys) == len(set(keys)) and set(keys) == set(COMPARE_KEYS)


def test_a_pool_chunk_budget_reaches_its_instances(tmp_path):
    """``chunk_tokens`` on a pool overrides ``[engine] prefill_chunk_tokens`` for its instances
    (and a bad value names the key)."""
    from pdd_core.sim import Policy, Simulator

    text = SMALL.read_text(encoding="utf-8").replace(
        'chip = "h20"\nrole = "MD"\ninstances = 1\ntp = 8\n',
        'chip = "h20"\nrole = "MD"\ninstances = 1\ntp = 8\nchunk_tokens = 2048\n',
        1,
    )
    path = tmp_path / "chunked.toml"
    path.write_text(text, encoding="utf-8")
    scenario = load_scenario(path)
    sim = Simulator(
        scenario.topology_for("pdd"),
        Policy.PDD,
        model_id=scenario.model_id,
        sla=scenario.sla,
        table=scenario.table,
        config=scenario.config,
    )
    assert {i.chunk_tokens for i in sim.decode} == {2048}
    assert {i.chunk_tokens for i in sim.prefill} == {scenario.config.prefill_chunk_tokens}
    path.write_text(text.replace("chunk_tokens = 2048", "chunk_tokens = 0"), encoding="utf-8")
    with pytest.raises(ValueError, match="chunk_tokens"):
        load_scenario(path)
