"""The simulator's results are held: seeded scenarios under every policy must reproduce the
summaries (and a fingerprint of every request's record) stored in ``golden_summaries.json``.

A speed-up of the simulator must leave these identical (counts, strings and booleans exactly,
floats to 1e-9 relative): a change that alters them is a change of the model, not an
optimisation, and must be argued and the file regenerated on purpose, with

    .venv/bin/python tests/pdd_core/sim/test_golden.py --write
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdd_core.scenario import load_scenario
from pdd_core.sim import SimulatedRequest
from pdd_core.sim.config import SimConfig

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).with_name("golden_summaries.json")
SCENARIOS = ROOT / "fixtures" / "scenarios"
TRACES = ROOT / "fixtures" / "traces"
POLICIES = ("colocated", "same-dc", "naive-cross-dc", "pdd")
REL_TOL = 1e-9

# name -> (scenario file, trace or None, arrival time scale, max requests, SimConfig changes).
# The time scales load the small traces (10x and 20x their rate) so that queues, paged-KV
# preemption, cache eviction, relays, handoffs and rejections all happen; ``small_kv`` gives
# MD's DRC 90% of its KV and doubles the batch limit, so MD preempts.
CASES: dict[str, tuple[Path, Path | None, float, int, dict[str, Any]]] = {
    "small": (SCENARIOS / "small.toml", None, 1.0, 0, {}),
    "small_open_loop": (SCENARIOS / "small.toml", None, 1.0, 0, {"closed_loop": False}),
    "small_kv": (
        SCENARIOS / "small.toml",
        None,
        0.5,
        0,
        {"drc_fraction": 0.9, "max_batch": 256},
    ),
    "reference": (SCENARIOS / "pdd_reference.toml", None, 1.0, 150, {}),
    "sim_speed_mooncake": (
        ROOT / "bench" / "sim_speed.toml",
        TRACES / "mooncake_conversation_sample.jsonl",
        0.05,
        0,
        {},
    ),
    "kimi_synthetic": (
        SCENARIOS / "mooncake_conversation.toml",
        TRACES / "mooncake_synthetic_sample.jsonl",
        0.1,
        0,
        {},
    ),
    "kimi_closed_loop": (
        SCENARIOS / "mooncake_conversation.toml",
        TRACES / "mooncake_conversation_sample.jsonl",
        0.1,
        0,
        {"closed_loop": True},
    ),
}

FLOAT_FIELDS = (
    "arrival_s",
    "queue_s",
    "prefill_s",
    "transfer_s",
    "handoff_s",
    "ttft_s",
    "tpot_mean_s",
    "longest_stall_s",
    "finish_s",
    "wan_bytes",
)
EXACT_FIELDS = (
    "id",
    "pipeline",
    "handoff_mode",
    "rejected",
    "reason",
    "hit_tokens_p",
    "hit_tokens_md",
    "miss_tokens",
    "tokens_rld",
    "tokens_md",
    "id_handoffs",
    "kv_handoffs",
)


def fingerprint(records: list[SimulatedRequest]) -> dict[str, Any]:
    """Every record's discrete fields (hashed, in order) and each float field's sum and max."""
    digest = hashlib.sha256()
    for record in records:
        digest.update("|".join(str(getattr(record, f)) for f in EXACT_FIELDS).encode())
        digest.update(b"\n")
    out: dict[str, Any] = {"count": len(records), "exact_sha256": digest.hexdigest()}
    for name in FLOAT_FIELDS:
        values = [getattr(r, name) for r in records]
        finite = [v for v in values if not math.isnan(v)]
        out[name] = {
            "nan": len(values) - len(finite),
            "sum": math.fsum(finite),
            "max": max(finite, default=0.0),
        }
    return out


def run_case(name: str, policy: str) -> dict[str, Any]:
    path, trace, scale, limit, changes = CASES[name]
    scenario = load_scenario(path, trace=trace)
    requests = scenario.workload.requests()
    if limit:
        requests = requests[:limit]
    if scale != 1.0:
        requests = [replace(r, arrival_s=r.arrival_s * scale) for r in requests]
    config: SimConfig = replace(scenario.config, **changes)
    result = scenario.run(policy, requests, config=config)
    return {"summary": result.summary.to_dict(), "records": fingerprint(result.records)}


def same(expected: Any, actual: Any, where: str) -> list[str]:
    """Differences between two JSON-like values (floats to ``REL_TOL``, the rest exactly)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        diffs = (
            [f"{where}: keys {sorted(expected)} != {sorted(actual)}"]
            if (expected.keys() != actual.keys())
            else []
        )
        for key in expected.keys() & actual.keys():
            diffs += same(expected[key], actual[key], f"{where}.{key}")
        return diffs
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} items != {len(actual)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in same(e, a, f"{where}[{i}]")
        ]
    if (
        isinstance(expected, float)
        and isinstance(actual, float | int)
        and not isinstance(actual, bool)
    ):
        if math.isnan(expected) and math.isnan(actual):
            return []
        if math.isclose(expected, actual, rel_tol=REL_TOL, abs_tol=1e-12):
            return []
        return [f"{where}: {expected!r} != {actual!r}"]
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: {expected!r} != {actual!r}"]
    return []


def as_json(value: dict[str, Any]) -> Any:
    """The value as it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_simulator_reproduces_the_golden_summaries(case, policy):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    expected = golden[case][policy]
    diffs = same(expected, as_json(run_case(case, policy)), f"{case}/{policy}")
    assert not diffs, "\n".join(diffs[:20])


def test_the_golden_cases_exercise_what_an_optimisation_could_break():
    """The stored runs are not trivial: rejections, relays, handoffs of both kinds, WAN
    cancellations, preemptions and cache hits all occur somewhere in them."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    summaries = [golden[c][p]["summary"] for c in CASES for p in POLICIES]
    assert sum(s["rejected"] for s in summaries) > 0
    assert sum(s["preemptions"] for s in summaries) > 0
    assert sum(s["wan_cancelled"] for s in summaries) > 0
    assert any(s["pipeline_mix"].get("P-RLD-MD", 0) > 0 for s in summaries)
    assert any(0 < s["handoff_kv_share"] < 1 for s in summaries)  # both handoff kinds
    assert any(s["handoff_mix"].get("extend-decode", 0) > 0 for s in summaries)
    assert any(s["handoff_mix"].get("one-shot", 0) > 0 for s in summaries)
    assert any(s["hit_token_weighted"] > 0.5 for s in summaries)
    assert all(s["served"] > 0 for s in summaries)


def test_the_comparison_catches_a_change():
    base = {"a": 1.0, "b": [1, "x"], "c": math.nan, "d": True}
    assert same(base, dict(base), "s") == []
    assert same(base, {**base, "a": 1.0 + 1e-12}, "s") == []
    assert same(base, {**base, "a": 1.0 + 1e-6}, "s") == ["s.a: 1.0 != 1.000001"]
    assert same(base, {**base, "b": [2, "x"]}, "s") == ["s.b[0]: 1 != 2"]
    assert same(base, {**base, "d": 1}, "s") == ["s.d: True != 1"]
    assert same(base, {**base, "c": 0.0}, "s") == ["s.c: nan != 0.0"]


def write() -> None:
    golden = {case: {p: as_json(run_case(case, p)) for p in POLICIES} for case in sorted(CASES)}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: test_golden.py --write  (regenerates golden_summaries.json)")
    write()
