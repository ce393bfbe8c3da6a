"""Streaming summaries (issue #29 item 3): a run folded as its requests end gives
``summarize``'s counts and sums exactly and its percentiles within the sketch's accuracy."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from pdd_core import metrics
from pdd_core.cli.simulate import write_records_csv
from pdd_core.scenario import load_scenario
from pdd_core.sim import RecordFile, SimResult, StreamResult, simulate, simulate_stream
from pdd_core.sim.sessions import ClosedLoop
from pdd_core.sim.stream import (
    SKETCH_RELATIVE_ACCURACY,
    StreamingSummary,
    new_sketch,
    sketch_quantile,
)
from pdd_core.specs import SLA
from pdd_core.workload import AgenticWorkload, generate_agentic, stream_agentic

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"
ALPHA = SKETCH_RELATIVE_ACCURACY
# Figures counted or summed from integers: equal exactly.
EXACT = ("policy", "requests", "served", "rejected", "makespan_s", "goodput_rps",
         "throughput_rps", "output_tokens_per_s", "rld_token_share", "hit_token_weighted",
         "md_hit_token_weighted", "cost_per_hour", "bcr", "utilisation", "pipeline_mix",
         "handoff_mix", "sla_attainment", "singular_share", "wan_gbps_peak", "wan_busy_s",
         "wan_cancelled", "preemptions", "handoff_kv_share")  # fmt: skip
# Running float sums: equal up to rounding.
SUMMED = ("wan_bytes", "wan_gbps_mean", "wan_gbps_busy_mean", "hit_request_weighted",
          "revenue_per_hour", "bcr_revenue")  # fmt: skip


@pytest.fixture(scope="module")
def reference() -> tuple[SimResult, StreamResult, SLA]:
    # The reference scenario, a third of its sessions, with a tight TTFT target so that some
    # requests are refused and some miss.
    scenario = load_scenario(REFERENCE)
    generator = replace(scenario.workload.generator, sessions=50)
    scenario = replace(
        scenario,
        workload=replace(scenario.workload, generator=generator),
        sla=replace(scenario.sla, ttft_p90_s=1.5, ttft_p99_s=3.0),
    )
    listed = scenario.run("pdd", scenario.workload.requests())
    streamed = scenario.run_stream("pdd", scenario.workload.stream(), window_s=120.0)
    return listed, streamed, scenario.sla


def _within(values: list[float], q: float, sketched: float) -> bool:
    """``sketched`` within the relative accuracy of the order statistics either side of the
    q-th percentile's rank (the exact percentile interpolates between them)."""
    xs = sorted(values)
    position = q / 100 * (len(xs) - 1)
    low, high = xs[math.floor(position)], xs[math.ceil(position)]
    return low * (1 - ALPHA) <= sketched <= high * (1 + ALPHA)


def test_counts_and_token_sums_equal_the_list_summary_exactly(reference):
    listed, streamed, _ = reference
    exact, folded = listed.summary, streamed.summary
    assert exact.rejected > 0
    assert 0 < exact.sla_attainment < 1
    for key in EXACT:
        assert getattr(folded, key) == getattr(exact, key), key
    for key in SUMMED:
        assert getattr(folded, key) == pytest.approx(getattr(exact, key), rel=1e-12), key
    assert folded.trace_hit_token_weighted != folded.trace_hit_token_weighted  # NaN: not replayed
    for mine, theirs in zip(folded.hit_bands, exact.hit_bands, strict=True):
        for key in ("band", "requests", "share", "rejected", "ttft_within_sla", "pipelines"):
            assert mine[key] == theirs[key] or (math.isnan(mine[key]) and math.isnan(theirs[key]))
        assert mine["wan_share"] == pytest.approx(theirs["wan_share"], rel=1e-12)
        assert mine["rld_token_share"] == theirs["rld_token_share"]


def test_percentiles_are_within_the_sketch_accuracy_of_the_exact_ones(reference):
    listed, streamed, _ = reference
    served = [r for r in listed.records if not r.rejected]
    columns = {
        "ttft": [r.ttft_s for r in served],
        "tpot": [r.tpot_mean_s for r in served if r.output_tokens > 1],
        "e2e": [r.e2e_s for r in served],
    }
    for name, values in columns.items():
        for q in (50, 90, 99):
            sketched = getattr(streamed.summary, f"{name}_p{q}")
            assert _within(values, q, sketched), (name, q)
            exact = getattr(listed.summary, f"{name}_p{q}")
            assert sketched == pytest.approx(exact, rel=3 * ALPHA)
    assert _within([r.longest_stall_s for r in served], 99, streamed.summary.longest_stall_p99)


def test_the_sla_verdict_is_the_lists(reference):
    listed, streamed, _ = reference
    assert streamed.summary.sla_met == listed.summary.sla_met
    assert streamed.summary.sla_violated == listed.summary.sla_violated


def test_windows_count_each_request_once_in_the_window_it_ended(reference):
    listed, streamed, sla = reference
    expected: dict[float, list[int]] = {}
    for r in listed.records:
        ended = r.arrival_s if r.rejected else r.finish_s
        row = expected.setdefault(math.floor(ended / 120.0) * 120.0, [0, 0, 0, 0, 0])
        if r.rejected:
            row[1] += 1
            continue
        row[0] += 1
        row[2] += metrics.request_meets_sla(r.ttft_s, r.tpot_mean_s, sla.ttft_p90_s,
                                            sla.tpot_p90_s)  # fmt: skip
        row[3] += r.output_tokens
        row[4] += r.hit_tokens_p
    got = {w.start_s: [w.served, w.rejected, w.good, w.output_tokens, w.hit_tokens]
           for w in streamed.windows}  # fmt: skip
    assert got == dict(sorted(expected.items()))
    assert all(w.end_s == w.start_s + 120.0 for w in streamed.windows)


def test_streamed_records_on_disk_are_the_list_runs_records(reference, tmp_path):
    listed, _, _ = reference
    scenario = load_scenario(REFERENCE)
    generator = replace(scenario.workload.generator, sessions=50)
    scenario = replace(
        scenario,
        workload=replace(scenario.workload, generator=generator),
        sla=replace(scenario.sla, ttft_p90_s=1.5, ttft_p99_s=3.0),
    )
    with RecordFile(tmp_path / "streamed.csv") as sink:
        scenario.run_stream("pdd", scenario.workload.stream(), records=sink)
    write_records_csv(tmp_path / "listed.csv", listed.records)
    assert (tmp_path / "streamed.csv").read_bytes() == (tmp_path / "listed.csv").read_bytes()


def test_a_session_stream_simulates_as_its_list_closed_and_open_loop(pdd_topology):
    params = AgenticWorkload(sessions=8, session_rate_per_s=0.3, turns_mean=5, turn_gap_s=0.5)
    for closed in (True, False):
        config = replace(load_scenario(REFERENCE).config, closed_loop=closed)
        kwargs = {"model_id": "deepseek-v3", "config": config}
        listed = simulate(pdd_topology, "pdd", generate_agentic(params, seed=2), **kwargs)
        streamed = simulate(pdd_topology, "pdd", stream_agentic(params, seed=2), **kwargs)
        assert streamed.records == listed.records
        assert streamed.summary == listed.summary
        folded = simulate_stream(pdd_topology, "pdd", stream_agentic(params, seed=2), **kwargs)
        assert folded.summary.served == listed.summary.served


def test_the_closed_loop_forgets_a_session_once_its_last_turn_is_out():
    params = AgenticWorkload(sessions=5, turns_mean=4, singular_share=0.0)
    loop = ClosedLoop(stream_agentic(params, seed=1))
    first = next(loop.first)
    assert loop.waiting == 1
    turn, released = first, 1
    while (turn := loop.after(turn, turn.arrival_s + 1.0)) is not None:
        released += 1
    assert loop.waiting == 0
    assert released == sum(
        1 for r in generate_agentic(params, seed=1) if r.session == first.session
    )


def test_a_sketched_percentile_with_misses_follows_the_window_rule():
    values = [0.1 * k for k in range(1, 101)]
    sketch = new_sketch()
    for v in values:
        sketch.add(v)
    window = metrics.window_sla(values, values, ttft_p90_s=1, ttft_p99_s=1, tpot_p90_s=1,
                                tpot_p99_s=1, misses=5)  # fmt: skip
    assert sketch_quantile(sketch, 90, misses=5) == pytest.approx(window.ttft_p90_s, rel=ALPHA)
    assert window.ttft_p99_s == math.inf
    assert sketch_quantile(sketch, 99, misses=5) == math.inf
    assert math.isnan(sketch_quantile(new_sketch(), 50))
    assert sketch_quantile(new_sketch(), 50, misses=1) == math.inf


def test_record_file_writes_json_lines_with_nan_as_null(reference, tmp_path):
    listed, _, _ = reference
    path = tmp_path / "records.jsonl"
    with RecordFile(path) as sink:
        for record in listed.records:
            sink.append(record)
        assert len(sink) == len(listed.records)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [row["id"] for row in rows] == [r.id for r in listed.records]
    refused = next(row for row in rows if row["rejected"])
    assert refused["ttft_s"] is None


def test_a_record_that_ends_before_a_finished_window_is_refused(reference):
    listed, _, _ = reference
    served = sorted((r for r in listed.records if not r.rejected), key=lambda r: r.finish_s)
    folded = StreamingSummary(SLA(), window_s=60.0)
    folded.append(served[-1])
    with pytest.raises(ValueError, match="in order of the time they ended"):
        folded.append(served[0])


def test_a_window_must_have_a_width():
    with pytest.raises(ValueError, match="window_s"):
        StreamingSummary(SLA(), window_s=0.0)
    assert len(StreamingSummary(SLA())) == 0
