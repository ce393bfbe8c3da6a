"""Validation of the simulator (issue item 6): exact lone-request timing, conservation,
determinism, monotonicity in WAN bandwidth, and the DRC's effect on WAN bytes."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from pdd_core import perf
from pdd_core.routing import RoutingTable
from pdd_core.sim import Policy, SimConfig, policy_topology, simulate
from pdd_core.specs import Role, topology_from_dict
from pdd_core.transfer import transfer_time
from pdd_core.workload import AgenticWorkload, Request, generate_agentic

from .conftest import MODEL, baseline, two_sites

NO_REJECT = RoutingTable(early_rejection=False)


def _workload(sessions: int = 8, seed: int = 5) -> list[Request]:
    return generate_agentic(
        AgenticWorkload(sessions=sessions, session_rate_per_s=0.3, turns_mean=8, turn_gap_s=3.0),
        seed=seed,
    )


def _p_shape(topology):
    """The prefill pool's instance shape (tp x pp), as the simulator times it."""
    return topology.pools_of(Role.PREFILL)[0].shape


def _lone(input_tokens: int = 12_000, output: int = 50) -> Request:
    return Request(id="r1", arrival_s=1.0, input_tokens=input_tokens, output_tokens=output)


# The first token is sampled at the end of prefill and emitted when the decoder admits the
# sequence (issue #12 item 8), so a lone request's TTFT has no decode step in it.
def test_lone_request_same_dc_is_prefill_plus_rdma(baseline_topology):
    topo = baseline_topology
    model, chip = topo.models[MODEL], topo.chips["h800"]
    result = simulate(topo, "same-dc", [_lone()], model_id=MODEL)

    record = result.records[0]
    prefill = perf.prefill_time(model, chip, 12_000, 0, _p_shape(topo)).seconds
    rdma = transfer_time(topo.link_between("a", "a"), perf.kv_bytes(model, 12_000))
    assert record.ttft_s == pytest.approx(prefill + rdma, rel=1e-12)
    assert record.queue_s == 0.0
    assert record.transfer_s == pytest.approx(rdma, rel=1e-12)


def test_lone_request_pdd_p_md_is_prefill_plus_wan(pdd_topology):
    topo = pdd_topology
    model = topo.models[MODEL]
    table = RoutingTable(transfer_budget_s=100.0)
    result = simulate(topo, "pdd", [_lone()], model_id=MODEL, table=table)

    record = result.records[0]
    prefill = perf.prefill_time(model, topo.chips["h800"], 12_000, 0, _p_shape(topo)).seconds
    # The default WAN transfer starts from RFC 6928's initial window (``SimConfig``).
    wan = transfer_time(
        topo.link_between("a", "b"),
        perf.kv_bytes(model, 12_000),
        initial_window_bytes=SimConfig().wan_initial_window_bytes,
    )
    assert record.pipeline == "P-MD"
    assert record.ttft_s == pytest.approx(prefill + wan, rel=1e-9)
    assert record.wan_bytes == perf.kv_bytes(model, 12_000)
    assert record.tokens_md == 50 and record.tokens_rld == 0


def test_lone_relayed_request_gets_first_token_from_rld(pdd_topology):
    topo = pdd_topology
    model = topo.models[MODEL]
    table = RoutingTable(transfer_budget_s=0.0)
    result = simulate(topo, "pdd", [_lone(output=2000)], model_id=MODEL, table=table)

    record = result.records[0]
    prefill = perf.prefill_time(model, topo.chips["h800"], 12_000, 0, _p_shape(topo)).seconds
    rdma = transfer_time(topo.link_between("a", "a"), perf.kv_bytes(model, 12_000))
    assert record.pipeline == "P-RLD-MD"
    assert record.ttft_s == pytest.approx(prefill + rdma, rel=1e-9)
    assert record.tokens_rld > 0 and record.tokens_md > 0
    assert record.tokens_rld + record.tokens_md == 2000
    assert record.handoff_mode in ("one-shot", "extend-decode")


@pytest.mark.parametrize("policy", [p.value for p in Policy])
def test_every_request_finishes_once_or_is_rejected_with_a_reason(policy, pdd_topology):
    requests = _workload()
    topo = policy_topology(policy, pdd_topology, baseline())
    result = simulate(topo, policy, requests, model_id=MODEL)

    counts = Counter(r.id for r in result.records)
    assert set(counts) == {r.id for r in requests}
    assert set(counts.values()) == {1}
    for record in result.records:
        if record.rejected:
            assert record.reason
        else:
            assert record.reason == ""
            assert record.finish_s >= record.arrival_s + record.ttft_s


@pytest.mark.parametrize("policy", [p.value for p in Policy])
def test_output_tokens_add_up(policy, pdd_topology):
    requests = _workload()
    by_id = {r.id: r for r in requests}
    topo = policy_topology(policy, pdd_topology, baseline())
    result = simulate(topo, policy, requests, model_id=MODEL, table=NO_REJECT)

    assert not any(r.rejected for r in result.records)
    for record in result.records:
        expected = max(1, by_id[record.id].output_tokens)
        assert record.tokens_rld + record.tokens_md == expected == record.output_tokens


def test_fixed_seed_gives_identical_results():
    topo = topology_from_dict(two_sites(wan_jitter=True))
    requests = _workload()
    first = simulate(topo, "pdd", requests, model_id=MODEL, config=SimConfig(seed=11))
    second = simulate(topo, "pdd", requests, model_id=MODEL, config=SimConfig(seed=11))
    assert first.records == second.records
    assert first.summary == second.summary


def test_more_wan_bandwidth_never_worsens_naive_cross_dc_ttft():
    # Four decoders: one H20 x 8 holds about four of these ~30K-token contexts, and with a
    # single one its admission queue, not the WAN, would set TTFT (the first token is emitted
    # when the decoder admits the sequence).
    requests = _workload(sessions=10)
    previous = None
    for gbps in (5.0, 10.0, 20.0, 40.0, 100.0):
        topo = policy_topology(
            "naive-cross-dc",
            topology_from_dict(two_sites(wan_gbps=gbps, wan_jitter=True, md_instances=4)),
            baseline(),
        )
        summary = simulate(
            topo,
            "naive-cross-dc",
            requests,
            model_id=MODEL,
            table=NO_REJECT,
            config=SimConfig(seed=2),
        ).summary
        ttft = (summary.ttft_p50, summary.ttft_p90, summary.ttft_p99)
        if previous is not None:
            assert all(now <= before + 1e-9 for now, before in zip(ttft, previous, strict=True))
        previous = ttft


def test_drc_reduces_wan_bytes_for_multi_turn_sessions(pdd_topology):
    requests = _workload()
    assert max(r.turn for r in requests) > 1
    on = simulate(
        pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT, config=SimConfig(drc=True)
    )
    off = simulate(
        pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT, config=SimConfig(drc=False)
    )
    assert on.summary.wan_bytes < 0.5 * off.summary.wan_bytes
    assert off.summary.md_hit_token_weighted == 0.0
    assert on.summary.md_hit_token_weighted > 0.5


def test_singular_requests_never_cross_the_wan(pdd_topology):
    singular = Request(id="s", arrival_s=0.0, input_tokens=60_000, output_tokens=100)
    result = simulate(pdd_topology, "pdd", [singular], model_id=MODEL)
    record = result.records[0]
    assert record.pipeline == "P-RLD"
    assert record.wan_bytes == 0.0
    assert record.tokens_rld == 100


def test_hopeless_requests_are_rejected_and_counted(baseline_topology):
    table = RoutingTable(reject_ttft_factor=0.001)
    result = simulate(baseline_topology, "same-dc", [_lone()], model_id=MODEL, table=table)
    assert result.summary.rejected == 1
    assert result.records[0].reason == "predicted TTFT over the SLA"
    assert math.isnan(result.summary.ttft_p50)
