"""The fixed-length benchmark workload and the scenario table that asks for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdd_core.scenario import load_scenario
from pdd_core.workload import FixedWorkload, generate_fixed

ROOT = Path(__file__).resolve().parents[2]
AGGREGATED = ROOT / "fixtures" / "scenarios" / "llama70b_h200_aggregated.toml"


def test_fixed_requests_have_the_stated_lengths_and_no_shared_blocks() -> None:
    requests = generate_fixed(FixedWorkload(requests=500, rate_per_s=4.0), seed=2)
    assert len(requests) == 500
    assert {(r.input_tokens, r.output_tokens) for r in requests} == {(4096, 500)}
    blocks = [b for r in requests for b in r.block_hashes]
    assert len(blocks) == len(set(blocks)) == 500 * 8  # 4096 / 512 per request, none reused
    assert {r.session for r in requests} == {None}  # each its own one-turn session


def test_fixed_arrivals_are_poisson_at_the_rate_and_reproducible() -> None:
    requests = generate_fixed(FixedWorkload(requests=4000, rate_per_s=10.0), seed=3)
    arrivals = np.array([r.arrival_s for r in requests])
    assert np.all(np.diff(arrivals) >= 0)
    gaps = np.diff(arrivals)
    # Exponential gaps: mean 1/rate, coefficient of variation 1 (within sampling error).
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.07)
    assert generate_fixed(FixedWorkload(requests=4000, rate_per_s=10.0), seed=3) == requests


@pytest.mark.parametrize(
    ("field", "value"), [("requests", 0), ("input_tokens", 1.5), ("rate_per_s", 0.0)]
)
def test_fixed_workload_refuses_bad_values(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        FixedWorkload(**{field: value})  # type: ignore[arg-type]


def test_aggregated_case_scenario_has_one_site_and_the_stated_workload() -> None:
    scenario = load_scenario(AGGREGATED)
    assert scenario.model_id == "llama-3.1-70b"
    chips = sum(p.instances * p.chips_per_instance for p in scenario.baseline.pools)
    assert chips == 32
    assert {p.chip for p in scenario.baseline.pools} == {"h200"}
    assert scenario.pdd == scenario.baseline  # no [[pools]]: one site, no PDD deployment
    requests = scenario.workload.requests()
    assert {(r.input_tokens, r.output_tokens) for r in requests} == {(4096, 500)}
    assert len(requests) / requests[-1].arrival_s == pytest.approx(14.5, rel=0.05)


def test_workload_tables_are_exclusive(tmp_path: Path) -> None:
    text = AGGREGATED.read_text(encoding="utf-8").replace(
        "[workload.fixed]", "[workload.generator]\nsessions = 3\n\n[workload.fixed]", 1
    )
    path = tmp_path / "both.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[workload\] fixed"):
        load_scenario(path)
