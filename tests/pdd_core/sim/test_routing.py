"""The routing decisions the simulator and the gateway share (pdd_core.routing)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdd_core.routing import (
    HandoffMode,
    InstanceView,
    Pipeline,
    RouteFeatures,
    RoutingTable,
    choose_handoff_mode,
    choose_instance,
    choose_pipeline,
    predict_rejection,
)
from pdd_core.specs import SLA

TABLE = RoutingTable(transfer_budget_s=0.5)


def _features(**kw: float) -> RouteFeatures:
    base = {
        "input_tokens": 64_000,
        "hit_tokens_p": 60_000,
        "hit_tokens_md": 60_000,
        "predicted_output_tokens": 1000,
        "wan_transfer_s": 0.2,
    }
    base.update(kw)
    return RouteFeatures(**base)  # type: ignore[arg-type]


def test_singular_traffic_goes_to_rld_only():
    decision = choose_pipeline(_features(hit_tokens_p=0, predicted_output_tokens=100), TABLE)
    assert decision.pipeline is Pipeline.P_RLD


def test_high_hit_short_output_is_not_singular():
    decision = choose_pipeline(_features(predicted_output_tokens=100), TABLE)
    assert decision.pipeline is Pipeline.P_MD


def test_transfer_within_budget_goes_p_md_and_over_budget_relays():
    assert choose_pipeline(_features(wan_transfer_s=0.5), TABLE).pipeline is Pipeline.P_MD
    assert choose_pipeline(_features(wan_transfer_s=0.51), TABLE).pipeline is Pipeline.P_RLD_MD


def test_handoff_mode_follows_rld_load_and_token_count():
    assert choose_handoff_mode(64, 0.0, TABLE) is HandoffMode.ONE_SHOT
    assert choose_handoff_mode(65, 0.1, TABLE) is HandoffMode.EXTEND_DECODE
    assert choose_handoff_mode(65, 0.7, TABLE) is HandoffMode.ONE_SHOT


def test_choose_instance_prefers_the_soonest_finish_then_the_larger_hit():
    cold_idle = InstanceView(0, 0, 0.0, 1.0)
    warm_busy = InstanceView(1, 50_000, 0.5, 0.2)
    assert choose_instance([cold_idle, warm_busy]) is warm_busy
    tie = InstanceView(2, 60_000, 0.5, 0.2)
    assert choose_instance([warm_busy, tie]) is tie
    with pytest.raises(ValueError, match="candidates"):
        choose_instance([])


@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 100), st.floats(0, 100)), min_size=1))
def test_choose_instance_returns_a_minimum(views):
    candidates = [InstanceView(i, h, q, s) for i, (h, q, s) in enumerate(views)]
    chosen = choose_instance(candidates)
    assert all(chosen.queue_s + chosen.service_s <= c.queue_s + c.service_s for c in candidates)


def test_predict_rejection_uses_the_p99_target_and_can_be_disabled():
    sla = SLA(ttft_p90_s=1.0, ttft_p99_s=2.0)
    assert predict_rejection(2.01, sla, RoutingTable())
    assert not predict_rejection(2.0, sla, RoutingTable())
    assert not predict_rejection(99.0, sla, RoutingTable(early_rejection=False))


@pytest.mark.parametrize(
    ("field", "value"),
    [("transfer_budget_s", -1.0), ("rld_load_threshold", 1.5), ("handoff_chunk_tokens", 0)],
)
def test_routing_table_validates_and_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        RoutingTable(**{field: value})


def test_with_overrides_replaces_known_fields_and_reports_unknown_keys() -> None:
    from pdd_core.routing import RoutingTable, with_overrides

    table, unknown = with_overrides(RoutingTable(), {"transfer_budget_s": 0.25, "zz": 1, "aa": 2})

    assert table.transfer_budget_s == 0.25
    assert table.handoff_chunk_tokens == RoutingTable().handoff_chunk_tokens
    assert unknown == ["aa", "zz"]


def test_with_overrides_rejects_bad_values() -> None:
    import pytest

    from pdd_core.routing import RoutingTable, with_overrides

    with pytest.raises(ValueError, match="rld_load_threshold"):
        with_overrides(RoutingTable(), {"rld_load_threshold": 3})
