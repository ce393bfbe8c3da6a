"""The shared predictor: waits, transfers, relay choice, predicted TTFT and the decision."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdd_core.estimates import (
    DecodeState,
    LinkState,
    PrefillState,
    choose_prefill,
    decode_load,
    decode_wait_s,
    link_s,
)
from pdd_core.predict import choose_relay, predict, predicted_ttft_s, relay_at_prefill_end
from pdd_core.routing import Pipeline, RoutingTable
from pdd_core.specs import SLA, LinkKind, LinkSpec
from pdd_core.transfer import transfer_time

# 8 Gbps = 1e9 bytes/s.
WAN = LinkState(bandwidth_gbps=8.0, rtt_ms=20.0)
RDMA = LinkState(bandwidth_gbps=800.0, rtt_ms=0.0)
IDLE_MD = DecodeState(active=0, max_batch=8, free_kv_tokens=1_000_000)
KV = 1000.0  # bytes per token


def test_link_time_is_the_fair_share_of_the_flows_plus_one_new_one() -> None:
    busy = LinkState(bandwidth_gbps=8.0, rtt_ms=20.0, flows=3)
    assert link_s(busy, 1e9) == pytest.approx(4.0 + 0.02)
    assert link_s(WAN, 0) == pytest.approx(0.02)


def test_link_time_agrees_with_the_transfer_physics() -> None:
    spec = LinkSpec(
        id="w", kind=LinkKind.WAN, source_site="a", target_site="b", bandwidth_gbps=25, rtt_ms=30
    )
    state = LinkState.of(spec, flows=2, setup_ms=1.5, initial_window_bytes=14_600)
    expected = transfer_time(spec, 3e8, flows=3, setup_s=0.0015, initial_window_bytes=14_600)
    assert link_s(state, 3e8) == pytest.approx(expected, rel=1e-12)


def test_decode_wait_is_zero_when_a_slot_and_the_kv_are_free() -> None:
    state = DecodeState(active=3, max_batch=8, free_kv_tokens=5000, step_s=0.02)
    assert decode_wait_s(state, 5000) == 0.0


def test_decode_wait_when_full_is_the_queue_times_the_mean_finish_interval() -> None:
    full = DecodeState(
        active=4, max_batch=4, free_kv_tokens=0, waiting=2, step_s=0.02, mean_remaining_tokens=100
    )
    # One of 4 sequences finishes every 100 x 0.02 / 4 = 0.5 s; 3 intervals for the new one.
    assert decode_wait_s(full, 10) == pytest.approx(1.5)


def test_decode_load_is_the_higher_of_slots_and_kv_in_use() -> None:
    state = DecodeState(active=2, max_batch=8, free_kv_tokens=100, kv_capacity_tokens=1000)
    assert decode_load(state) == pytest.approx(0.9)
    assert decode_load(DecodeState(active=2, max_batch=8, free_kv_tokens=0)) == 0.25


def test_relay_choice_is_the_least_loaded_with_ties_to_the_lower_index() -> None:
    busy = DecodeState(active=6, max_batch=8, free_kv_tokens=10)
    light = DecodeState(active=1, max_batch=8, free_kv_tokens=10)
    assert choose_relay([busy, light, light]) == 1
    assert choose_relay([]) == -1


def test_prefill_choice_is_soonest_finish_then_larger_hit_then_lower_index() -> None:
    a = PrefillState(queued_s=1.0, hit_tokens=0, prefill_s=1.0)
    b = PrefillState(queued_s=0.0, hit_tokens=500, prefill_s=2.0)
    c = PrefillState(queued_s=0.5, hit_tokens=100, prefill_s=1.5)
    assert choose_prefill([a, b, c]) == 1
    assert choose_prefill([a, a]) == 0
    with pytest.raises(ValueError, match="prefills"):
        choose_prefill([])


def _predict(**overrides: object) -> object:
    args: dict[str, object] = {
        "input_tokens": 10_000,
        "output_tokens": 1000,
        "prefills": [PrefillState(0.2, 0, 0.5)],
        "mains": [IDLE_MD],
        "relays": [DecodeState(active=0, max_batch=8, free_kv_tokens=1_000_000)],
        "wan": WAN,
        "rdma": RDMA,
        "kv_bytes_per_token": KV,
        "table": RoutingTable(transfer_budget_s=1.0),
        "sla": SLA(ttft_p90_s=2.0, ttft_p99_s=5.0),
    }
    args.update(overrides)
    return predict(**args)  # type: ignore[arg-type]


def test_small_transfer_goes_p_md_and_ttft_is_wait_prefill_wan() -> None:
    prediction = _predict()
    assert prediction.pipeline is Pipeline.P_MD
    assert prediction.wan_s == pytest.approx(10_000 * KV / 1e9 + 0.02)
    assert prediction.predicted_ttft_s == pytest.approx(0.2 + 0.5 + prediction.wan_s)
    assert prediction.relay_index == -1
    assert prediction.rejected is False


def test_large_transfer_relays_through_the_least_loaded_rld() -> None:
    busy = DecodeState(active=7, max_batch=8, free_kv_tokens=1_000_000)
    free = DecodeState(active=0, max_batch=8, free_kv_tokens=1_000_000)
    prediction = _predict(input_tokens=2_000_000, relays=[busy, free])
    assert prediction.pipeline is Pipeline.P_RLD_MD
    assert prediction.relay_index == 1
    rdma = 2_000_000 * KV / 1e11
    assert prediction.rdma_s == pytest.approx(rdma)
    assert prediction.predicted_ttft_s == pytest.approx(0.2 + 0.5 + rdma)


def test_md_choice_weighs_drc_hit_against_admission_wait() -> None:
    cold = DecodeState(active=0, max_batch=8, free_kv_tokens=10**6)
    warm_full = DecodeState(
        active=8,
        max_batch=8,
        free_kv_tokens=0,
        step_s=0.05,
        mean_remaining_tokens=800,
        hit_tokens=9000,
    )
    warm = DecodeState(active=1, max_batch=8, free_kv_tokens=10**6, hit_tokens=9000)
    prediction = _predict(mains=[cold, warm_full, warm])
    assert prediction.md_index == 2
    assert prediction.hit_tokens_md == 9000
    assert prediction.wan_s == pytest.approx(1000 * KV / 1e9 + 0.02)


def test_no_main_decode_means_the_relay_finishes_the_request() -> None:
    prediction = _predict(mains=[])
    assert prediction.pipeline is Pipeline.P_RLD
    assert prediction.md_index == -1
    assert math.isinf(prediction.wan_s)


def test_hopeless_prediction_is_rejected() -> None:
    prediction = _predict(prefills=[PrefillState(queued_s=30.0, hit_tokens=0, prefill_s=1.0)])
    assert prediction.rejected is True


@given(
    flows=st.integers(min_value=0, max_value=50),
    nbytes=st.floats(min_value=0, max_value=1e11),
    more=st.floats(min_value=1.0, max_value=100.0),
)
def test_more_bandwidth_never_predicts_a_slower_transfer(
    flows: int, nbytes: float, more: float
) -> None:
    slow = LinkState(bandwidth_gbps=10.0, rtt_ms=25.0, flows=flows, initial_window_bytes=14_600)
    fast = LinkState(
        bandwidth_gbps=10.0 * more, rtt_ms=25.0, flows=flows, initial_window_bytes=14_600
    )
    assert link_s(fast, nbytes) <= link_s(slow, nbytes) + 1e-12


def test_predicted_ttft_adds_its_parts() -> None:
    assert predicted_ttft_s(0.1, 0.2, 0.3, 0.4) == pytest.approx(1.0)


def test_at_the_end_of_prefill_a_crowded_line_sends_p_md_through_the_least_loaded_relay() -> None:
    # 1 GB of KV MD lacks: 1 s alone on the line, 5 s as a fifth flow; the target is 2 s.
    busy = DecodeState(active=7, max_batch=8, free_kv_tokens=1_000_000)
    free = DecodeState(active=0, max_batch=8, free_kv_tokens=1_000_000)
    sla = SLA(ttft_p90_s=2.0, ttft_p99_s=5.0)
    main = DecodeState(active=0, max_batch=8, free_kv_tokens=10_000_000, hit_tokens=200_000)

    def check(flows: int, elapsed_s: float) -> int:
        return relay_at_prefill_end(
            elapsed_s, input_tokens=1_200_000, main=main, relays=[busy, free],
            wan=WAN._replace(flows=flows), rdma=RDMA, kv_bytes_per_token=KV, sla=sla,
        )  # fmt: skip

    assert check(flows=0, elapsed_s=0.5) == -1  # 0.5 + 1.02 s fits the target
    assert check(flows=4, elapsed_s=0.5) == 1  # 0.5 + 5.02 s does not: the idle relay
    assert check(flows=0, elapsed_s=1.5) == 1  # the queue and prefill took the budget
    # The relay path must be sooner: its RDMA transfer of the whole prompt (12 s) is not.
    slow = RDMA._replace(bandwidth_gbps=0.8)
    assert relay_at_prefill_end(
        0.5, input_tokens=1_200_000, main=main, relays=[free], wan=WAN._replace(flows=4),
        rdma=slow, kv_bytes_per_token=KV, sla=sla,
    ) == -1  # fmt: skip


def test_at_the_end_of_prefill_p_md_stands_without_a_relay() -> None:
    crowded = WAN._replace(flows=50)
    assert relay_at_prefill_end(
        1.0, input_tokens=1_000_000, main=IDLE_MD, relays=[], wan=crowded, rdma=RDMA,
        kv_bytes_per_token=KV, sla=SLA(ttft_p90_s=2.0, ttft_p99_s=5.0),
    ) == -1  # fmt: skip
