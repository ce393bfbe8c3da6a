"""WAN and handoff physics in the simulator (issue #12 item 7): the token-ID versus ship-the-KV
choice comes out of the numbers, transfers of requests finished on RLD are cancelled, and the
line's busy-span rate is reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pdd_core import perf
from pdd_core.routing import RoutingTable
from pdd_core.sim import SimConfig, simulate
from pdd_core.specs import RldMode, topology_from_dict
from pdd_core.workload import Request

from .conftest import MODEL, two_sites

RELAY_ALL = RoutingTable(transfer_budget_s=0.0, early_rejection=False)


def _lone(output: int = 2000, input_tokens: int = 12_000) -> Request:
    return Request(id="r1", arrival_s=1.0, input_tokens=input_tokens, output_tokens=output)


def _topology(rtt_ms: float, gbps: float):
    raw = two_sites(wan_gbps=gbps)
    raw["links"][1]["rtt_ms"] = rtt_ms
    return topology_from_dict(raw)


def test_a_long_round_trip_makes_md_recompute_from_token_ids():
    # An extend on this MD costs about one weight read (~30 ms); shipping pays an 80 ms RTT.
    result = simulate(_topology(80.0, 40.0), "pdd", [_lone()], model_id=MODEL, table=RELAY_ALL)
    record = result.records[0]
    assert record.pipeline == "P-RLD-MD"
    assert record.id_handoffs > 0
    assert record.kv_handoffs == 0
    assert result.summary.handoff_kv_share == 0.0


def test_a_near_and_fast_line_makes_shipping_the_kv_sooner():
    # 300 Gbps at 0.01 ms: a few eager tokens' KV arrive in microseconds, an extend takes ms.
    result = simulate(_topology(0.01, 300.0), "pdd", [_lone()], model_id=MODEL, table=RELAY_ALL)
    record = result.records[0]
    assert record.pipeline == "P-RLD-MD"
    assert record.kv_handoffs > 0
    assert record.id_handoffs == 0
    # The shipped chunks' bytes are WAN bytes too.
    assert record.wan_bytes > perf.kv_bytes(result_model(), 12_000)
    assert record.tokens_rld + record.tokens_md == 2000


def result_model():
    return _topology(20.0, 40.0).models[MODEL]


def test_a_request_finished_on_rld_cancels_its_wan_transfer():
    # A 5 Gbps line needs ~0.17 s for 12K tokens of KV; 3 tokens finish on RLD far sooner.
    result = simulate(
        _topology(20.0, 5.0), "pdd", [_lone(output=3)], model_id=MODEL, table=RELAY_ALL
    )
    record = result.records[0]
    assert record.tokens_rld == 3
    assert result.summary.wan_cancelled == 1
    assert record.wan_bytes < perf.kv_bytes(result_model(), 12_000)


def test_busy_span_rate_is_bytes_over_the_time_a_transfer_was_on_the_line():
    requests = [
        Request(id=f"r{i}", arrival_s=10.0 * i, input_tokens=12_000, output_tokens=50)
        for i in range(3)
    ]
    table = RoutingTable(transfer_budget_s=100.0, early_rejection=False)
    summary = simulate(_topology(20.0, 40.0), "pdd", requests, model_id=MODEL, table=table).summary
    assert summary.wan_busy_s > 0
    assert summary.wan_gbps_busy_mean == pytest.approx(
        summary.wan_bytes * 8 / summary.wan_busy_s / 1e9
    )
    # Three lone transfers, each at the line rate while its bytes move plus one round trip.
    assert summary.wan_gbps_busy_mean < 40.0
    assert summary.wan_gbps_busy_mean > summary.wan_gbps_mean


def test_slow_start_lengthens_a_cold_wan_transfer():
    table = RoutingTable(transfer_budget_s=100.0, early_rejection=False)
    warm = simulate(
        _topology(20.0, 40.0),
        "pdd",
        [_lone(50)],
        model_id=MODEL,
        table=table,
        config=SimConfig(wan_initial_window_bytes=0.0),
    )
    cold = simulate(
        _topology(20.0, 40.0),
        "pdd",
        [_lone(50)],
        model_id=MODEL,
        table=table,
        config=SimConfig(wan_initial_window_bytes=14_600, wan_setup_ms=2.0),
    )
    assert cold.records[0].transfer_s > warm.records[0].transfer_s + 0.002


def test_shared_rld_decodes_relayed_requests_on_the_prefill_instances():
    raw = two_sites()
    raw["pools"] = [p for p in raw["pools"] if p["role"] != "RLD"]
    topology = replace(topology_from_dict(raw), rld_mode=RldMode.SHARED)
    result = simulate(topology, "pdd", [_lone()], model_id=MODEL, table=RELAY_ALL)
    record = result.records[0]
    assert record.pipeline == "P-RLD-MD"
    assert record.tokens_rld > 0
    assert record.tokens_rld + record.tokens_md == 2000
    # No RLD pool: the relay's busy time is the P instances', not counted twice.
    assert set(result.summary.utilisation) == {"P", "MD"}


def test_rld_keeps_decoding_while_md_has_no_room_for_the_handoff():
    # With 95% of its KV given to the DRC, MD (H20 x 8 x pp 2, ~1.45M tokens) keeps ~72K
    # tokens for running sequences: one 40K-token sequence at a time. Without the admission
    # check the second request would stall on MD's queue for the whole of the first one's
    # decode (~3,000 steps); with it RLD keeps emitting its tokens.
    requests = [
        Request(id=f"r{i}", arrival_s=1.0 + 0.01 * i, input_tokens=40_000, output_tokens=3000)
        for i in range(2)
    ]
    result = simulate(
        _topology(20.0, 40.0),
        "pdd",
        requests,
        model_id=MODEL,
        table=RELAY_ALL,
        config=SimConfig(drc_fraction=0.95),
    )
    records = {r.id: r for r in result.records}
    assert {r.pipeline for r in records.values()} == {"P-RLD-MD"}
    assert records["r1"].longest_stall_s < 1.0
    assert records["r1"].tokens_rld > records["r0"].tokens_rld
    assert records["r1"].tokens_rld + records["r1"].tokens_md == 3000
