"""``pdd_core.sweep``: the points of a sweep, the WAN override, one point's row, the CLI verb."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pdd_core.cli import main
from pdd_core.cli.compare import compare_scenario
from pdd_core.scenario import load_scenario
from pdd_core.specs import LinkKind
from pdd_core.sweep import (
    SweepPoint,
    SweepRow,
    run_point,
    run_sweep,
    sweep_points,
    sweep_table,
    with_wan_gbps,
)

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "fixtures" / "scenarios" / "small.toml"


def test_points_are_the_cross_product_scenario_then_bandwidth_then_policy() -> None:
    points = sweep_points(["a.toml", "b.toml"], ["pdd", "same-dc"], [10.0, 40.0])
    assert [(p.scenario, p.wan_gbps, p.policy) for p in points] == [
        ("a.toml", 10.0, "pdd"),
        ("a.toml", 10.0, "same-dc"),
        ("a.toml", 40.0, "pdd"),
        ("a.toml", 40.0, "same-dc"),
        ("b.toml", 10.0, "pdd"),
        ("b.toml", 10.0, "same-dc"),
        ("b.toml", 40.0, "pdd"),
        ("b.toml", 40.0, "same-dc"),
    ]
    assert [p.wan_gbps for p in sweep_points(["a.toml"], ["pdd"])] == [None]


@pytest.mark.parametrize(
    ("scenarios", "policies", "wan", "message"),
    [
        ([], ["pdd"], [], "scenarios: give at least one"),
        (["a.toml"], [], [], "policies: give at least one"),
        (["a.toml", "a.toml"], ["pdd"], [], "scenarios: lists a value twice"),
        (["a.toml"], ["pdd"], [5.0, 5.0], "wan_gbps: lists a value twice"),
        (["a.toml"], ["fast"], [], "policy: must be one of"),
        (["a.toml"], ["pdd"], [0.0], "wan_gbps: must be a positive number"),
        (["a.toml"], ["pdd"], [math.nan], "wan_gbps: must be a positive number"),
    ],
)
def test_bad_points_are_refused_with_the_field_named(
    scenarios: list[str], policies: list[str], wan: list[float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        sweep_points(scenarios, policies, wan)


def test_a_point_round_trips_through_json() -> None:
    point = SweepPoint("small.toml", "pdd", 25.0)
    assert SweepPoint.from_dict(json.loads(json.dumps(point.to_dict()))) == point


def test_wan_override_sets_every_wan_link_and_nothing_else() -> None:
    scenario = load_scenario(SMALL)
    changed = with_wan_gbps(scenario, 7.5)
    for before, after in ((scenario.pdd, changed.pdd), (scenario.baseline, changed.baseline)):
        for old, new in zip(before.links, after.links, strict=True):
            expected = 7.5 if old.kind is LinkKind.WAN else old.bandwidth_gbps
            assert new.bandwidth_gbps == expected
            assert new.rtt_ms == old.rtt_ms
    assert changed.pdd.pools == scenario.pdd.pools


def test_wan_override_of_a_scenario_without_wan_is_an_error() -> None:
    from dataclasses import replace

    scenario = load_scenario(SMALL)
    local = tuple(link for link in scenario.pdd.links if link.kind is not LinkKind.WAN)
    no_wan = replace(scenario, pdd=replace(scenario.pdd, links=local, pools=()))
    with pytest.raises(ValueError, match="has no WAN link"):
        with_wan_gbps(no_wan, 10.0)


def test_a_point_is_the_compare_capacity_of_its_policy() -> None:
    """One implementation: the sweep's row carries exactly ``pdd compare``'s capacity figures."""
    compared = compare_scenario(str(SMALL), progress=False, capacity_iterations=2)
    row = run_point(load_scenario(SMALL), SweepPoint("small", "pdd"), iterations=2)
    capacity = compared["capacity"]["pdd"]
    summary = compared["results"]["pdd"].summary
    assert row.capacity_rps == capacity.goodput_rps
    assert row.session_factor == capacity.factor
    assert row.bcr == capacity.bcr
    assert row.cost_per_hour == capacity.cost_per_hour
    assert row.simulations == 1 + len(capacity.probes)
    assert row.goodput_rps == summary.goodput_rps
    assert row.sla_met == summary.sla_met
    assert row.requests == summary.requests


def test_a_narrower_wan_does_not_raise_cross_dc_capacity() -> None:
    scenario = load_scenario(SMALL)
    narrow, wide = (
        run_point(scenario, SweepPoint("small", "naive-cross-dc", gbps), iterations=2)
        for gbps in (5.0, 400.0)
    )
    assert narrow.wan_gbps == 5.0
    assert narrow.capacity_rps <= wide.capacity_rps
    assert narrow.cost_per_hour == wide.cost_per_hour
    # the whole KV crosses the WAN under naive-cross-dc: 5 Gbps is far worse than 400
    assert narrow.goodput_rps < wide.goodput_rps


def test_rows_are_deterministic_and_survive_json() -> None:
    points = sweep_points(["small"], ["same-dc"])
    first = run_sweep(lambda _: load_scenario(SMALL), points, iterations=1)
    again = run_sweep(lambda _: load_scenario(SMALL), points, iterations=1)
    assert first == again
    restored = [SweepRow.from_dict(json.loads(json.dumps(r.to_dict()))) for r in first]
    assert restored == first
    table = sweep_table(first)
    assert table.splitlines()[0].split()[:2] == ["scenario", "policy"]
    assert "same-dc" in table.splitlines()[1]


def test_pdd_sweep_prints_one_row_per_point(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["sweep", str(SMALL), "--policy", "same-dc", "--wan-gbps", "10", "--wan-gbps", "40",
         "--capacity-iterations", "1", "--json"]
    )  # fmt: skip
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["policy"], r["wan_gbps"]) for r in rows] == [("same-dc", 10.0), ("same-dc", 40.0)]
    assert all(r["capacity_rps"] >= 0 for r in rows)


def test_pdd_sweep_refuses_a_repeated_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(SMALL), "--wan-gbps", "10", "--wan-gbps", "10"]) == 2
    assert "wan_gbps: lists a value twice" in capsys.readouterr().err
