"""``pdd simulate``: run one policy of a scenario in the simulator.

It runs one policy (default ``pdd``) with a progress bar, prints the summary and writes
``results.json``, ``records.csv`` and ``report.html`` into ``--out``; ``pdd compare``
(``cli/compare.py``) runs every policy on the same workload.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdd_core.report import write_report

if TYPE_CHECKING:
    from pdd_core.scenario import Scenario

POLICY_NAMES = ("colocated", "same-dc", "naive-cross-dc", "pdd")


def register(subparsers: Any) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="simulate a scenario under one policy",
        description="Run a scenario file (TOML) through the discrete-event simulator; print the "
        "summary and write results.json, records.csv and report.html.",
    )
    sim.add_argument(
        "scenario", help="scenario file (TOML), e.g. fixtures/scenarios/pdd_reference.toml"
    )
    sim.add_argument("--policy", choices=POLICY_NAMES, default="pdd")
    sim.add_argument("--trace", help="replay this trace instead of the scenario's workload")
    sim.add_argument("--out", default="sim-out", help="output directory (default: sim-out)")
    sim.add_argument("--no-report", action="store_true", help="skip report.html")
    sim.add_argument(
        "--stream",
        action="store_true",
        help="fold each request's record as it ends instead of keeping them (memory does not "
        "grow with the run; percentiles from 1%%-accurate sketches): writes results.json and "
        "windows.csv, no report.html",
    )
    sim.add_argument(
        "--records",
        metavar="FILE",
        help="with --stream: write every record to FILE as it ends (CSV, or JSON lines when "
        "FILE ends in .jsonl)",
    )
    sim.add_argument(
        "--window-s",
        type=float,
        default=None,
        help="with --stream: width of windows.csv's windows in seconds (default 60, "
        "pdd_core.sim.stream.DEFAULT_WINDOW_S)",
    )
    sim.set_defaults(func=run_simulate)


def progress_bar(total: int, label: str) -> Callable[[int], None]:
    """A one-line progress bar on stderr, redrawn every 1% (silent when not a terminal)."""
    if not sys.stderr.isatty() or total <= 0:
        return lambda done: None
    step = max(1, total // 100)

    def update(done: int) -> None:
        if done % step and done != total:
            return
        filled = round(30 * done / total)
        sys.stderr.write(f"\r{label:<15} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return update


def run_simulate(args: argparse.Namespace) -> int:
    from pdd_core.scenario import load_scenario
    from pdd_core.sim.summary import trace_hits, with_trace_hits

    if args.records and not args.stream:
        raise ValueError("--records: only with --stream (records.csv is written without it)")
    scenario = load_scenario(args.scenario, trace=args.trace)
    if args.stream:
        return run_streaming(args, scenario)
    requests = scenario.workload.requests()
    result = scenario.run(args.policy, requests, progress=progress_bar(len(requests), args.policy))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rates = trace_hits(requests, scenario.config.block_size)
    result = replace(result, summary=with_trace_hits(result.summary, rates))
    summary = result.summary.to_dict()
    payload = {"scenario": scenario.name, "policy": args.policy, "summary": json_safe(summary)}
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    write_records_csv(out / "records.csv", result.records)
    if not args.no_report:
        write_report(out / "report.html", scenario.name, {args.policy: result})
    print(arrivals_line(scenario.config.closed_loop))
    _print_summary(summary)
    print(
        f"wrote {out / 'results.json'}, {out / 'records.csv'}"
        + ("" if args.no_report else f", {out / 'report.html'}")
    )
    return 0


def run_streaming(args: argparse.Namespace, scenario: Scenario) -> int:
    """``pdd simulate --stream``: the same summary table from a run that keeps no records."""
    from pdd_core.sim import RecordFile
    from pdd_core.sim.stream import DEFAULT_WINDOW_S, SKETCH_RELATIVE_ACCURACY

    requests = scenario.workload.stream()
    total = len(requests) if isinstance(requests, list) else requests.requests or 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = progress_bar(total, args.policy)
    window_s = DEFAULT_WINDOW_S if args.window_s is None else args.window_s
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(RecordFile(args.records)) if args.records else None
        result = scenario.run_stream(
            args.policy, requests, progress=progress, window_s=window_s, records=sink
        )
    summary = result.summary.to_dict()
    payload = {"scenario": scenario.name, "policy": args.policy, "summary": json_safe(summary)}
    (out / "results.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    write_windows_csv(out / "windows.csv", result.windows)
    print(arrivals_line(scenario.config.closed_loop))
    print(
        f"streamed: percentiles within {SKETCH_RELATIVE_ACCURACY:.0%} (DDSketch); the trace's "
        "own hit rates are not replayed (NaN)"
    )
    _print_summary(summary)
    written = [out / "results.json", out / "windows.csv", *([args.records] if args.records else [])]
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def write_windows_csv(path: Path, windows: Any) -> None:
    from dataclasses import astuple, fields

    from pdd_core.sim import WindowSummary

    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([f.name for f in fields(WindowSummary)])
        for window in windows:
            writer.writerow(astuple(window))


def arrivals_line(closed_loop: bool) -> str:
    """Which arrival model a run used (``SimConfig.closed_loop``), as ``pdd simulate`` says."""
    if closed_loop:
        return (
            "arrivals: closed loop (a session's next turn after its previous answer plus "
            "tool/think time; the default for generated sessions)"
        )
    return "arrivals: open loop (every request at its trace time; the default for a trace)"


def write_records_csv(path: Path, records: Any) -> None:
    from pdd_core.sim import SimulatedRequest

    columns = SimulatedRequest.columns()
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for record in records:
            writer.writerow([getattr(record, c) for c in columns])


def json_safe(value: Any) -> Any:
    """NaN and infinities become None so the JSON is strict."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _print_summary(summary: dict[str, Any]) -> None:
    keys = (
        "policy",
        "requests",
        "served",
        "rejected",
        "ttft_p50",
        "ttft_p90",
        "ttft_p99",
        "tpot_p50",
        "tpot_p99",
        "e2e_p99",
        "goodput_rps",
        "throughput_rps",
        "sla_met",
        "sla_violated",
        "sla_attainment",
        "wan_gbps_mean",
        "wan_gbps_busy_mean",
        "wan_gbps_peak",
        "wan_cancelled",
        "singular_share",
        "handoff_kv_share",
        "preemptions",
        "rld_token_share",
        "hit_request_weighted",
        "hit_token_weighted",
        "trace_hit_request_weighted",
        "trace_hit_token_weighted",
        "md_hit_token_weighted",
        "cost_per_hour",
        "bcr",
        "utilisation",
        "pipeline_mix",
        "handoff_mix",
    )
    for key in keys:
        value = summary[key]
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif isinstance(value, dict):
            value = ", ".join(f"{k} {v:.3g}" for k, v in value.items())
        print(f"{key:<24}{value}")
