"""Percentiles, hit rates and hit bands shared by every report."""

from __future__ import annotations

import math

import pytest

from pdd_core import metrics
from pdd_core.metrics import (
    HIT_BAND_EDGES,
    hit_band_index,
    hit_band_labels,
    hit_band_shares,
    mean,
    percentile,
    percentiles,
    request_weighted_hit,
    share_at_least,
    token_weighted_hit,
)


def test_band_labels_follow_the_edges() -> None:
    assert HIT_BAND_EDGES == (0.0, 0.2, 0.4, 0.7, 0.9, 0.95, 0.99, 1.0)
    assert hit_band_labels() == (
        "0-20%",
        "20-40%",
        "40-70%",
        "70-90%",
        "90-95%",
        "95-99%",
        "99-100%",
    )


@pytest.mark.parametrize(
    ("ratio", "band"),
    [
        (0.0, 0),
        (0.1999, 0),
        (0.2, 1),
        (0.69, 2),
        (0.9, 4),
        (0.95, 5),
        (0.99, 6),
        (1.0, 6),
        (1.2, 6),
    ],
)
def test_band_edges_are_lower_inclusive(ratio: float, band: int) -> None:
    assert hit_band_index(ratio) == band


def test_band_shares_sum_to_one() -> None:
    shares = hit_band_shares([0.0, 0.5, 0.96, 0.97])

    assert shares == (0.25, 0.0, 0.25, 0.0, 0.0, 0.5, 0.0)
    assert hit_band_shares([]) == (0.0,) * 7


def test_share_at_least_equals_the_top_bands() -> None:
    ratios = [0.1, 0.94, 0.95, 0.999, 1.0]

    assert share_at_least(ratios, 0.95) == 0.6
    assert share_at_least(ratios, 0.95) == pytest.approx(sum(hit_band_shares(ratios)[5:]))
    assert share_at_least([], 0.95) == 0.0


def test_request_and_token_weighted_hits_differ_on_skew() -> None:
    # One short request fully hit, one long request not hit at all.
    hits, inputs = [100, 0], [100, 900]

    assert request_weighted_hit(hits, inputs) == 0.5
    assert token_weighted_hit(hits, inputs) == 0.1
    assert request_weighted_hit([], []) == 0.0
    assert token_weighted_hit([0], [0]) == 0.0
    with pytest.raises(ValueError, match="hit_tokens"):
        token_weighted_hit([1], [1, 2])


def test_percentiles_interpolate_linearly() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]

    assert percentile(values, 50) == 3.0
    assert percentile(values, 90) == pytest.approx(4.6)
    assert percentiles(values) == {
        "p50": 3.0,
        "p90": pytest.approx(4.6),
        "p99": pytest.approx(4.96),
    }
    assert percentiles(values, (25, 99.9)).keys() == {"p25", "p99.9"}
    assert math.isnan(percentile([], 50))
    assert math.isnan(percentiles([])["p99"])
    assert mean(values) == 3.0
    assert math.isnan(mean([]))
    with pytest.raises(ValueError, match="q"):
        percentile(values, 101)


# ---- the one definition of "SLA met" ----------------------------------------------------

TARGETS = {"ttft_p90_s": 2.0, "ttft_p99_s": 5.0, "tpot_p90_s": 0.05, "tpot_p99_s": 0.1}


def test_a_request_meets_the_sla_only_served_within_both_p90_targets() -> None:
    assert metrics.request_meets_sla(2.0, 0.05, 2.0, 0.05) is True
    assert metrics.request_meets_sla(2.01, 0.01, 2.0, 0.05) is False
    assert metrics.request_meets_sla(0.1, 0.06, 2.0, 0.05) is False
    assert metrics.request_meets_sla(0.1, 0.01, 2.0, 0.05, served=False) is False
    assert metrics.request_meets_sla(math.nan, 0.01, 2.0, 0.05) is False


def test_a_window_within_every_target_is_met() -> None:
    window = metrics.window_sla([0.5] * 95 + [3.0] * 5, [0.02] * 100, **TARGETS)
    assert window.met is True
    assert window.violated == ""
    assert window.good == 95
    assert window.attainment == 0.95
    assert window.ttft_p90_s == 0.5


def test_rejections_count_as_infinitely_late_requests() -> None:
    window = metrics.window_sla([0.5] * 98, [0.02] * 98, misses=2, **TARGETS)
    assert window.met is False
    assert window.violated == "ttft_p99"
    assert window.ttft_p99_s == math.inf
    assert window.ttft_p90_s == 0.5
    assert window.requests == 100
    assert window.attainment == 0.98


def test_percentiles_without_misses_match_the_shared_percentile() -> None:
    values = [0.1 * i for i in range(37)]
    window = metrics.window_sla(values, [0.0] * 37, **TARGETS)
    assert window.ttft_p90_s == pytest.approx(metrics.percentile(values, 90), rel=1e-12)
    assert window.ttft_p99_s == pytest.approx(metrics.percentile(values, 99), rel=1e-12)


def test_the_first_broken_target_is_named() -> None:
    window = metrics.window_sla([0.5] * 10, [0.07] * 10, **TARGETS)
    assert window.violated == "tpot_p90"
    empty = metrics.window_sla([], [], **TARGETS)
    assert empty.met is False
    assert empty.violated == "no requests"
