"""Goodput as a capacity (issue #12 item 3) and the property tests of its Done-when list."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.routing import RoutingTable
from pdd_core.sim import policy_topology, simulate
from pdd_core.sim.capacity import find_capacity, offered_rps, scale_sessions
from pdd_core.specs import SLA, topology_from_dict
from pdd_core.workload import AgenticWorkload, Request, generate_agentic

from .conftest import MODEL, baseline, two_sites

NO_REJECT = RoutingTable(early_rejection=False)
SLA_LOOSE = SLA(ttft_p90_s=3.0, ttft_p99_s=8.0, tpot_p90_s=0.1, tpot_p99_s=0.2)


def _workload(sessions: int = 6, seed: int = 3) -> list[Request]:
    return generate_agentic(
        AgenticWorkload(
            sessions=sessions,
            session_rate_per_s=0.2,
            turns_mean=6,
            turn_gap_s=3.0,
            singular_share=0.0,
        ),
        seed=seed,
    )


def test_factor_one_is_the_workload_itself() -> None:
    requests = _workload()
    assert scale_sessions(requests, 1.0) == sorted(requests, key=lambda r: (r.arrival_s, r.id))


def test_doubling_adds_a_copy_of_every_session_with_its_own_ids_and_private_blocks() -> None:
    requests = _workload()
    doubled = scale_sessions(requests, 2.0, seed=1)
    assert len(doubled) == 2 * len(requests)
    assert len({r.id for r in doubled}) == len(doubled)
    sessions = Counter(r.session for r in doubled)
    assert len(sessions) == 2 * len({r.session for r in requests})
    originals = {r.id: r for r in requests}
    copies = [r for r in doubled if r.id.endswith("#1")]
    session_blocks = Counter()
    for r in requests:
        for block in set(r.block_hashes):
            session_blocks[block, r.session] += 1
    shared = {
        b
        for b in {b for b, _ in session_blocks}
        if sum(1 for (bb, _s) in session_blocks if bb == b) > 1
    }
    for copy in copies:
        original = originals[copy.id.removesuffix("#1")]
        assert copy.input_tokens == original.input_tokens
        assert copy.arrival_s >= original.arrival_s
        for mine, theirs in zip(copy.block_hashes, original.block_hashes, strict=True):
            assert (mine == theirs) == (theirs in shared)


def test_half_keeps_half_of_the_sessions() -> None:
    requests = _workload(sessions=8)
    half = scale_sessions(requests, 0.5, seed=2)
    assert len({r.session for r in half}) == 4
    assert {r.id for r in half} <= {r.id for r in requests}


def test_scaling_rejects_a_non_positive_factor() -> None:
    with pytest.raises(ValueError, match="factor"):
        scale_sessions(_workload(), 0.0)


def test_capacity_is_the_offered_rate_at_the_highest_factor_that_met_the_sla(
    pdd_topology,
) -> None:
    requests = _workload()

    def run(load: list[Request]) -> list:
        return simulate(pdd_topology, "pdd", load, model_id=MODEL, sla=SLA_LOOSE).records

    capacity = find_capacity(run, requests, SLA_LOOSE, 100.0, iterations=2, max_factor=8.0)
    met = [p for p in capacity.probes if p.met]
    assert met
    best = max(met, key=lambda p: p.factor)
    assert capacity.factor == best.factor
    assert capacity.goodput_rps == best.offered_rps
    assert capacity.bcr == pytest.approx(capacity.goodput_rps / 100.0)
    if capacity.bound == "":
        assert any(not p.met and p.factor > capacity.factor for p in capacity.probes)
    # Goodput never exceeds the offered rate.
    assert capacity.goodput_rps <= max(p.offered_rps for p in capacity.probes)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(min_value=0, max_value=50), factor=st.sampled_from([0.5, 1.0, 2.0]))
def test_fixed_load_goodput_never_exceeds_the_offered_rate(seed: int, factor: float) -> None:
    requests = scale_sessions(_workload(seed=seed), factor, seed=seed)
    topology = policy_topology("pdd", topology_from_dict(two_sites()), baseline())
    summary = simulate(topology, "pdd", requests, model_id=MODEL, sla=SLA_LOOSE).summary
    assert summary.goodput_rps <= offered_rps(requests) + 1e-12


def _sessions_with_reuse(reuse: float, sessions: int = 6, turns: int = 6) -> list[Request]:
    """Sessions whose every turn keeps ``reuse`` of the previous context's blocks (its prefix)
    and appends new ones, with outputs long enough that none is singular."""
    requests = []
    fresh = iter(range(10**9))
    block = 512
    for s in range(sessions):
        blocks = tuple(next(fresh) for _ in range(40))
        for t in range(turns):
            requests.append(
                Request(
                    id=f"s{s}-t{t}",
                    arrival_s=s * 7.0 + t * 4.0,
                    input_tokens=len(blocks) * block,
                    output_tokens=600,
                    block_hashes=blocks,
                    session=f"s{s}",
                    turn=t + 1,
                )
            )
            kept = blocks[: int(reuse * len(blocks))]
            blocks = kept + tuple(next(fresh) for _ in range(40 - len(kept)))
    requests.sort(key=lambda r: (r.arrival_s, r.id))
    return requests


def test_a_higher_hit_rate_never_raises_wan_bytes_per_request(pdd_topology) -> None:
    previous = float("inf")
    for reuse in (0.0, 0.25, 0.5, 0.75, 0.9, 1.0):
        requests = _sessions_with_reuse(reuse)
        summary = simulate(pdd_topology, "pdd", requests, model_id=MODEL, table=NO_REJECT).summary
        per_request = summary.wan_bytes / summary.served
        assert per_request <= previous
        previous = per_request
