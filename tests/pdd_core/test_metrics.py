"""Percentiles, hit rates and hit bands shared by every report."""

from __future__ import annotations

import math

import pytest

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
