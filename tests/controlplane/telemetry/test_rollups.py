"""Rollup math against a brute-force computation over the same random records (hypothesis),
and incremental updates that equal one-shot ones."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.telemetry import sketch
from controlplane.telemetry.models import TelemetryRollup
from controlplane.telemetry.rollups import CUMULATIVE, accumulate, window_start
from controlplane.telemetry.services import records_ingest
from controlplane.telemetry.summary import summarize
from pdd_core import metrics
from tests.controlplane.telemetry.conftest import T0, record_at

START = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
PIPELINES = ["P-MD", "P-RLD-MD", "P-RLD"]
latency = st.floats(min_value=sketch.MIN_VALUE, max_value=sketch.MAX_VALUE * 0.999)


@st.composite
def records(draw: Any) -> dict[str, Any]:
    size = draw(st.integers(0, 200_000))
    hit = draw(st.integers(0, size))
    return {
        "site": draw(st.sampled_from(["dc-a", "dc-b"])),
        "tenant": draw(st.sampled_from(["acme", "globex"])),
        "model": "m", "pipeline": draw(st.sampled_from(PIPELINES)),
        "finish_time": START + timedelta(seconds=draw(st.floats(0, 59.999))),
        "input_tokens": size, "hit_tokens": hit, "miss_tokens": size - hit,
        "output_tokens": draw(st.integers(0, 4000)),
        "ttft_s": draw(st.one_of(st.none(), latency)), "tpot_s": draw(latency),
        "wan_bytes": draw(st.integers(0, 10**9)), "rld_tokens": draw(st.integers(0, 100)),
        "md_tokens": draw(st.integers(0, 1000)),
        "handoff_mode": draw(st.sampled_from(["", "one-shot", "extend-decode"])),
        "sla_met": draw(st.booleans()), "rejected": draw(st.booleans()),
    }  # fmt: skip


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(records(), min_size=1, max_size=120))
def test_one_minute_window_matches_brute_force(batch: list[dict[str, Any]]) -> None:
    deltas = accumulate(batch, revenue_of=lambda r: r["output_tokens"] * 1e-6)
    point = summarize(deltas[(60, "all", "", START)], window_s=60, start=START, scope="all",
                      key="", cost_per_hour=10.0)  # fmt: skip

    served = [r for r in batch if not r["rejected"]]
    hits = [r["hit_tokens"] for r in served]
    inputs = [r["input_tokens"] for r in served]
    good = sum(r["sla_met"] for r in served)
    assert point["requests"] == len(batch)
    assert point["rejected"] == len(batch) - len(served)
    assert point["goodput_rps"] == pytest.approx(good / 60)
    assert point["bcr"] == pytest.approx(good / 60 / 10.0)
    if served:
        assert point["hit_request_weighted"] == pytest.approx(
            metrics.request_weighted_hit(hits, inputs)
        )
        bands = [0] * (len(metrics.HIT_BAND_EDGES) - 1)
        for h, n in zip(hits, inputs, strict=True):
            bands[metrics.hit_band_index(h / n if n else 0.0)] += 1
        assert point["hit_bands"] == bands
    if sum(inputs):
        assert point["hit_token_weighted"] == pytest.approx(
            metrics.token_weighted_hit(hits, inputs)
        )
    wan = sum(r["wan_bytes"] for r in served)
    assert point["wan_gbps"] == pytest.approx(wan * 8 / 60 / 1e9)
    rld, md = sum(r["rld_tokens"] for r in served), sum(r["md_tokens"] for r in served)
    assert point["rld_token_share"] == (pytest.approx(rld / (rld + md)) if rld + md else None)
    assert point["revenue_per_hour"] == pytest.approx(
        sum(r["output_tokens"] for r in served) * 1e-6 * 60
    )
    for name, qs in (("ttft", (50, 90, 99)), ("tpot", (50, 90, 99))):
        values = [r[f"{name}_s"] for r in served if r[f"{name}_s"] is not None]
        for q in qs:
            got = point[f"{name}_p{q}"]
            if not values:
                assert got is None
                continue
            exact = _nearest_rank(values, q)
            # the documented resolution: within a factor sqrt(GROWTH) of the exact percentile
            assert abs(math.log(got / exact)) <= math.log(1 + sketch.RELATIVE_ERROR)
    pipes = {p: sum(r["pipeline"] == p for r in served) for p in PIPELINES}
    assert point["pipelines"] == {p: n for p, n in sorted(pipes.items()) if n}


@settings(max_examples=40, deadline=None)
@given(st.lists(latency, min_size=1, max_size=300), st.lists(latency, min_size=1, max_size=300))
def test_merged_histograms_give_the_percentiles_of_the_union(
    a: list[float], b: list[float]
) -> None:
    merged = sketch.merge(sketch.histogram_of(a), sketch.histogram_of(b))

    for q in (50, 90, 99):
        exact = _nearest_rank(a + b, q)
        got = sketch.quantile(merged, q)
        assert got is not None
        assert abs(math.log(got / exact)) <= math.log(1 + sketch.RELATIVE_ERROR)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            latency,
            st.sampled_from(
                [
                    0.0,
                    sketch.MIN_VALUE,
                    sketch.MAX_VALUE,
                    sketch.MAX_VALUE * 2,
                    sketch.MIN_VALUE / 2,
                    sketch.MIN_VALUE * sketch.GROWTH,
                    sketch.MAX_VALUE * (1 - 1e-16),
                ]
            ),
        ),
        max_size=200,
    )
)
def test_a_histogram_counts_each_value_in_its_bucket(values: list[float]) -> None:
    expected: dict[str, int] = {}
    for value in values:
        key = str(sketch.bucket_index(value))
        expected[key] = expected.get(key, 0) + 1

    assert sketch.histogram_of(values) == expected


def test_windows_are_epoch_aligned() -> None:
    when = datetime(2026, 1, 5, 10, 0, 7, 900_000, tzinfo=UTC)

    assert window_start(when, 5) == datetime(2026, 1, 5, 10, 0, 5, tzinfo=UTC)
    assert window_start(when, 60) == datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
    assert window_start(when, CUMULATIVE).year == 1970


@pytest.mark.django_db
def test_two_batches_add_up_to_the_same_rows_as_one(acme: Any) -> None:
    batch = [record_at(T0 + timedelta(seconds=i), request_id=f"r{i}", ttft_s=0.1 * (i + 1))
             for i in range(8)]  # fmt: skip

    records_ingest(records=batch[:5])
    records_ingest(records=batch[5:])
    records_ingest(records=batch)  # a retry: all duplicates, changes nothing

    row = TelemetryRollup.objects.get(window_s=60, scope="all", key="", start=T0)
    assert (row.requests, row.input_tokens, row.hit_tokens, row.ttft_count) == (8, 8000, 7200, 8)
    assert sketch.total(row.ttft_hist) == 8
    fives = TelemetryRollup.objects.filter(window_s=5, scope="site", key="dc-a")
    assert sorted((r.start.second, r.requests) for r in fives) == [(0, 5), (5, 3)]
    cumulative = TelemetryRollup.objects.get(window_s=0, scope="site-pipeline", key="dc-a/P-RLD-MD")
    assert cumulative.requests == 8


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_on_the_same_rows_lose_no_update() -> None:
    import threading

    from django.db import connection

    from tests import factories

    factories.record_world("acme", "globex")
    batches = [
        [record_at(T0 + timedelta(seconds=(i * 7 + t) % 60), request_id=f"t{t}-{i}",
                   tenant=("acme", "globex")[i % 2], site=("dc-a", "dc-b")[(i + t) % 2])
         for i in range(100)]
        for t in range(6)
    ]  # fmt: skip
    barrier = threading.Barrier(6)
    failures: list[BaseException] = []

    def post(batch: list[dict[str, Any]]) -> None:
        try:
            barrier.wait()
            records_ingest(records=batch)
        except BaseException as exc:  # a deadlock would surface here
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert connection.vendor == "postgresql"
    assert failures == []
    row = TelemetryRollup.objects.get(window_s=60, scope="all", key="", start=T0)
    assert (row.requests, sketch.total(row.ttft_hist), row.input_tokens) == (600, 600, 600_000)
    fives = TelemetryRollup.objects.filter(window_s=5, scope="tenant", key="acme")
    assert sum(r.requests for r in fives) == 300
