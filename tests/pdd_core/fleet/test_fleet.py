"""The fleet planner on a small fleet: its file, its day, its demands, its plan."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pdd_core.cli import main
from pdd_core.fleet import load_fleet, process_map, serial_map
from pdd_core.fleet.demand import demand_by_id, demands, sites_of
from pdd_core.fleet.plan import allocate, day_task
from pdd_core.fleet.scale import scaled
from pdd_core.fleet.spec import fleet_from_dict
from pdd_core.fleet.traffic import Window, day_requests, session_starts, window_requests
from pdd_core.planner.design import COLOCATED, Design, PoolChoice
from pdd_core.routing import RoutingTable
from pdd_core.specs import Role

SMALL = Path(__file__).with_name("small_fleet.toml")
FLEET = Path(__file__).resolve().parents[3] / "fixtures" / "fleets" / "fleet.toml"


def raw() -> dict[str, Any]:
    with SMALL.open("rb") as fh:
        return tomllib.load(fh)


def test_the_shipped_fleet_is_five_sites_in_three_regions_of_ten_thousand_chips() -> None:
    spec = load_fleet(FLEET)
    assert len(spec.sites) == 5 and len(spec.regions) == 3
    assert spec.total_chips() >= 10_000
    assert len({s.chip for s in spec.inventory}) >= 4
    assert all(spec.chips[s.chip].price_per_hour > 0 for s in spec.inventory)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["fleet"].update(colour="red"), "[fleet] unknown key 'colour'"),
        (lambda r: r["inventory"][0].update(chip="h9000"), "unknown catalog chip 'h9000'"),
        (lambda r: r["inventory"][0].update(chips=0), "chips: must be a positive integer"),
        (lambda r: r["sites"][0].update(region="mars"), "unknown region 'mars'"),
        (lambda r: r["tenants"][0].update(model="gpt-9"), "not one of [[models]]"),
        (lambda r: r["tenants"][0].update(sessions_per_day=-3), "sessions_per_day"),
        (lambda r: r["tenants"][1].update(id="t1"), "'t1' is listed twice"),
        (lambda r: r["fleet"].update(diurnal_amplitude=1.5), "diurnal_amplitude"),
        (lambda r: r["regions"][0].update(peak_utc_hour=25), "peak_utc_hour"),
        (lambda r: r.update(links=r["links"][1:]), "site 'a' has no rdma fabric"),
        (lambda r: r["planner"].update(slice_requests=3), "slice_requests"),
        (lambda r: r["planner"].update(verify=0), "verify: must be at least 1"),
        (lambda r: r["tenants"][0]["workload"].update(turns=3), "unknown key 'turns'"),
    ],
)
def test_a_bad_fleet_file_names_the_key(change: Any, message: str) -> None:
    broken = raw()
    change(broken)
    with pytest.raises(ValueError, match=None) as caught:
        fleet_from_dict(broken)
    assert message in str(caught.value)


def test_a_window_holds_exactly_the_days_sessions_that_start_in_it() -> None:
    spec = load_fleet(SMALL)
    tenant = spec.tenants[0]
    day = list(day_requests(spec, tenant))
    starts: dict[str | None, float] = {}
    for r in day:
        starts[r.session] = min(starts.get(r.session, r.arrival_s), r.arrival_s)
    begin, length = 13 * 3600.0, 1800.0
    expected = {r.id: r for r in day if begin <= starts[r.session] < begin + length}
    window = {r.id: r for r in window_requests(spec, [tenant], Window(begin, length))}
    assert window.keys() == expected.keys() and window
    some = next(iter(window))
    assert window[some].block_hashes == expected[some].block_hashes
    assert window[some].arrival_s == pytest.approx(expected[some].arrival_s - begin, abs=1e-3)


def test_a_slice_is_every_kth_session_of_the_same_window() -> None:
    spec = load_fleet(SMALL)
    whole = window_requests(spec, spec.tenants, Window(13 * 3600.0, 1800.0))
    sliced = window_requests(spec, spec.tenants, Window(13 * 3600.0, 1800.0, every=3))
    assert {r.id for r in sliced} < {r.id for r in whole}
    assert all(int(r.id.split("-")[1][1:7]) % 3 == 0 for r in sliced)
    assert len(whole) / len(sliced) == pytest.approx(3, rel=0.35)


def test_a_window_past_midnight_wraps_to_the_start_of_the_day() -> None:
    spec = load_fleet(SMALL)
    requests = window_requests(spec, spec.tenants, Window(86_400.0 - 600.0, 1200.0))
    assert requests and requests[-1].arrival_s > 600.0
    assert [r.arrival_s for r in requests] == sorted(r.arrival_s for r in requests)


def test_sessions_start_three_times_faster_at_the_peak_than_at_the_trough() -> None:
    spec = load_fleet(SMALL)
    starts = session_starts(spec, spec.tenants[0])  # r1: peak at 14:00 UTC, trough at 02:00
    per_hour = [((starts >= h * 3600) & (starts < (h + 1) * 3600)).sum() for h in range(24)]
    assert per_hour[14] / per_hour[2] == pytest.approx(3.0, rel=0.3)
    assert sum(per_hour) == pytest.approx(spec.tenants[0].sessions_per_day, rel=0.05)


def test_no_two_tenants_share_a_block() -> None:
    spec = load_fleet(SMALL)
    window = Window(13 * 3600.0, 900.0)
    one = {b for r in window_requests(spec, spec.tenants[:1], window) for b in r.block_hashes}
    two = {b for r in window_requests(spec, spec.tenants[1:], window) for b in r.block_hashes}
    assert one and two and not one & two


def test_remote_sites_serve_main_decode_only() -> None:
    spec = load_fleet(SMALL)
    assert [d.id for d in demands(spec)] == ["llama-3.1-8b@r1", "llama-3.1-8b@r2"]
    far = sites_of(spec, demand_by_id(spec, "llama-3.1-8b@r2"))
    assert far == {
        "c": (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE),
        "b": (Role.MAIN_DECODE,),
    }


def test_allocation_gives_each_demand_its_need_and_never_more_than_the_stock() -> None:
    spec = load_fleet(SMALL)
    screens = [
        {"demand": "llama-3.1-8b@r1", "needs": {"a/h800": 40, "b/h20": 30}},
        {"demand": "llama-3.1-8b@r2", "needs": {"b/h20": 50, "c/h800": 8}},
    ]
    limits = allocate(spec, screens)
    assert limits["llama-3.1-8b@r1"]["a/h800"] >= 40
    # b/h20: 80 asked of 64, split by need (plus each one's small reserve).
    assert limits["llama-3.1-8b@r1"]["b/h20"] + limits["llama-3.1-8b@r2"]["b/h20"] <= 64
    assert limits["llama-3.1-8b@r2"]["b/h20"] > limits["llama-3.1-8b@r1"]["b/h20"]
    assert "a/h800" not in limits["llama-3.1-8b@r2"]  # r2 may not use a at all


def test_scaling_a_design_rounds_every_pool_up_and_keeps_one() -> None:
    p = PoolChoice("a", "h800", Role.PREFILL, 2, 8)
    design = Design(
        COLOCATED, p, PoolChoice("a", "h800", Role.MAIN_DECODE, 0, 8), None, RoutingTable()
    )
    assert scaled(design, 5, 1.0).prefill.instances == 10
    assert scaled(design, 5, 0.55).prefill.instances == 6
    assert scaled(design, 1, 0.25).prefill.instances == 1
    assert scaled(design, 5, 0.55).decode.instances == 0


def test_a_process_pool_returns_what_this_process_computes() -> None:
    calls = [(raw(), "t2"), (raw(), "t1")]
    here = serial_map(day_task, calls)
    there = process_map(2)(day_task, calls)
    for a, b in zip(here, there, strict=True):
        assert a["requests_per_hour"] == b["requests_per_hour"] and a["tenant"] == b["tenant"]
    assert {a["pid"] for a in there} != {a["pid"] for a in here}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    out = tmp_path_factory.mktemp("fleet")
    main(["plan", str(SMALL), "--out", str(out)])
    yield json.loads((out / "plan.json").read_text())


def test_pdd_plan_plans_every_demand_and_counts_the_day(planned: dict[str, Any]) -> None:
    day = sum(sum(t["requests_per_hour"]) for t in planned["day"])
    assert day > 20_000
    assert [d["demand"] for d in planned["demands"]] and all(
        d["fleet"]["sla_met"] for d in planned["demands"]
    )
    for d in planned["demands"]:
        assert d["fleet"]["requests"] > d["slice_requests"] or d["every"] == 1
        assert d["slice_plan"]["reasons"]["verdict"]["sentence"]
    timing = planned["timing"]
    assert timing["simulated_requests"] > 0 and timing["tasks_cpu_s"] > 0


def test_the_plan_stays_within_each_stock(planned: dict[str, Any]) -> None:
    used: dict[tuple[str, str], int] = {}
    for d in planned["demands"]:
        for pool in d["fleet"]["pools"]:
            used[(pool["site"], pool["chip"])] = (
                used.get((pool["site"], pool["chip"]), 0) + pool["chips"]
            )
            assert pool["chips"] <= d["limits"][f"{pool['site']}/{pool['chip']}"]
    for stock in planned["inventory"]:
        assert used.get((stock["site"], stock["chip"]), 0) <= stock["chips"]


def test_one_site_families_stay_in_the_demands_region(planned: dict[str, Any]) -> None:
    spec = load_fleet(SMALL)
    for d in planned["demands"]:
        region = demand_by_id(spec, d["demand"]).region
        if d["fleet"]["family"] != "pdd":
            assert {p["site"] for p in d["fleet"]["pools"]} <= set(spec.sites_in(region))
