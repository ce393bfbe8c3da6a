"""The bounds of a record (``pdd_core.records``, which ingestion applies): ``within_bounds``
(the fast check) agrees with the messages of ``record_bound_errors`` on every record,
including those on an edge."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.records import (
    MAX_REQUEST_S,
    TIMING_SLACK_S,
    RecordLimits,
    TimeBounds,
    record_bound_errors,
    within_bounds,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LIMITS = RecordLimits(max_context=8192, kv_bytes_per_token=1000.0)
TIMES = TimeBounds(skew_s=30, max_age_days=7, latest_finish=NOW + timedelta(seconds=30),
                   oldest_arrival=NOW - timedelta(days=7))  # fmt: skip


def record(**changes: Any) -> dict[str, Any]:
    base = {"model": "m", "input_tokens": 1000, "output_tokens": 200, "rld_tokens": 12,
            "md_tokens": 188, "wan_bytes": 1_000_000, "arrival_time": NOW - timedelta(seconds=3),
            "finish_time": NOW, "ttft_s": 0.5, "tpot_s": 0.03}  # fmt: skip
    return {**base, **changes}


def test_a_plausible_record_passes_both() -> None:
    assert within_bounds(record(), LIMITS, TIMES)
    assert record_bound_errors(record(), LIMITS, TIMES) == {}


def test_each_broken_bound_fails_the_fast_check_and_names_its_field() -> None:
    cases = {
        "input_tokens": record(input_tokens=8000, output_tokens=500),
        "rld_tokens": record(rld_tokens=201),
        "md_tokens": record(md_tokens=201),
        "wan_bytes": record(wan_bytes=LIMITS.max_wan_bytes(1200) + 1),
        "finish_time": record(finish_time=NOW + timedelta(seconds=31)),
        "arrival_time": record(arrival_time=NOW - timedelta(days=7, seconds=1)),
        "ttft_s": record(ttft_s=3.0 + TIMING_SLACK_S + 0.01),
        "tpot_s": record(tpot_s=math.nan),
    }
    for name, bad in cases.items():
        assert not within_bounds(bad, LIMITS, TIMES), name
        assert name in record_bound_errors(bad, LIMITS, TIMES), name
    too_long = record(arrival_time=NOW - timedelta(seconds=MAX_REQUEST_S + 1))
    assert not within_bounds(too_long, LIMITS, TIMES)
    assert "finish_time" in record_bound_errors(too_long, LIMITS, TIMES)


def _near(edge: int) -> st.SearchStrategy[int]:
    return st.integers(min_value=max(0, edge - 3), max_value=edge + 3)


@settings(max_examples=300, deadline=None)
@given(
    input_tokens=st.sampled_from([0, 1000, 7992, 8192]),
    output_tokens=_near(200),
    rld_tokens=_near(200),
    md_tokens=_near(200),
    wan_bytes=st.sampled_from([0, LIMITS.max_wan_bytes(1200), LIMITS.max_wan_bytes(9000)]),
    skew=st.sampled_from([-1.0, 29.999999, 30.0, 30.000001]),
    duration=st.sampled_from([-1.0, 0.0, 2.0, MAX_REQUEST_S, MAX_REQUEST_S + 0.5]),
    ttft=st.sampled_from(
        [None, 0.0, 1.0, 3.0, 3.0 + TIMING_SLACK_S, 3.1 + TIMING_SLACK_S, math.inf, math.nan]
    ),
)
def test_the_fast_check_is_true_exactly_when_there_are_no_messages(
    input_tokens: int, output_tokens: int, rld_tokens: int, md_tokens: int, wan_bytes: int,
    skew: float, duration: float, ttft: float | None,
) -> None:  # fmt: skip
    finish = NOW + timedelta(seconds=skew)
    fields = record(
        input_tokens=input_tokens, output_tokens=output_tokens, rld_tokens=rld_tokens,
        md_tokens=md_tokens, wan_bytes=wan_bytes, finish_time=finish,
        arrival_time=finish - timedelta(seconds=duration), ttft_s=ttft, tpot_s=ttft,
    )  # fmt: skip

    assert within_bounds(fields, LIMITS, TIMES) == (
        record_bound_errors(fields, LIMITS, TIMES) == {}
    )
