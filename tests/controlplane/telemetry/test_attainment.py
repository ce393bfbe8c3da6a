"""The SLA panel's figures: attainment per target (rejected requests as misses), its colour by
the error budget left, and one histogram reading for the percentile and the attainment."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from controlplane.telemetry import sketch
from controlplane.telemetry.attainment import colour, sla_panel, target_figure
from controlplane.telemetry.rollups import Delta
from controlplane.telemetry.services import records_ingest
from tests.controlplane.telemetry.conftest import record_at


@pytest.mark.parametrize(
    ("attainment", "percentile", "expected"),
    [
        (None, 90, "none"), (0.8999, 90, "red"), (0.90, 90, "amber"), (0.9499, 90, "amber"),
        (0.95, 90, "green"), (1.0, 90, "green"), (0.989, 99, "red"), (0.99, 99, "amber"),
        (0.995, 99, "green"),
    ],
)  # fmt: skip
def test_the_colour_follows_the_error_budget_left(
    attainment: float | None, percentile: int, expected: str
) -> None:
    assert colour(attainment, percentile) == expected


@given(
    st.lists(st.floats(min_value=1e-3, max_value=100.0), min_size=1, max_size=200),
    st.floats(min_value=1e-3, max_value=100.0),
    st.sampled_from([50, 90, 99]),
)
def test_a_target_is_met_by_the_attainment_exactly_when_by_the_percentile(
    values: list[float], target: float, q: int
) -> None:
    hist = sketch.histogram_of(values)
    quantile = sketch.quantile(hist, q)
    assert quantile is not None

    met_by_share = sketch.count_within(hist, target) / len(values) >= q / 100

    assert met_by_share == (quantile <= target)


def test_rejected_requests_count_as_misses() -> None:
    delta = Delta()
    delta.maps["ttft_hist"] = sketch.histogram_of([0.5] * 18)
    delta.counts["rejected"] = 2

    figure = target_figure(delta, "ttft", 90, 2.0)

    assert figure == {"value": pytest.approx(0.5, rel=0.06), "attainment": 0.9, "requests": 20,
                      "rejected": 2, "state": "amber"}  # fmt: skip


@pytest.mark.django_db
def test_the_panel_reads_the_newest_closed_minute_and_the_hour(acme: Any) -> None:
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    slow_then = [record_at(minute - timedelta(minutes=10, seconds=30), ttft_s=9.0,
                           request_id=f"s{i}") for i in range(5)]  # fmt: skip
    fast_last_minute = [record_at(minute - timedelta(seconds=30), ttft_s=0.3, request_id=f"f{i}")
                        for i in range(15)]  # fmt: skip
    records_ingest(records=slow_then + fast_last_minute)

    panel = sla_panel()

    assert [t["key"] for t in panel["targets"]] == ["ttft_p90", "ttft_p99", "tpot_p90", "tpot_p99"]
    assert panel["minute"]["requests"] == 15
    assert panel["minute"]["targets"]["ttft_p90"]["state"] == "green"
    assert panel["hour"]["requests"] == 20
    assert panel["hour"]["targets"]["ttft_p90"]["attainment"] == 0.75
    assert panel["hour"]["targets"]["ttft_p90"]["state"] == "red"
