"""``sim.measure``: the pooled SLA verdict is ``metrics.window_sla``'s, weights are multisets,
trace windows judge every request once, and paired ratios use the same replicates."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core import metrics
from pdd_core.sim.measure import _Sample, pooled_verdict, trace_windows
from pdd_core.specs import SLA
from pdd_core.workload import Request

SLA_ = SLA(ttft_p90_s=1.0, ttft_p99_s=2.0, tpot_p90_s=0.05, tpot_p99_s=0.1)


def _sample(ttft: list[float], tpot: list[float], misses: int) -> _Sample:
    return _Sample(np.sort(np.array(ttft)), np.sort(np.array(tpot)), misses, 1.0)


latencies = st.lists(st.floats(min_value=0.0, max_value=3.0), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(ttft=latencies, misses=st.integers(min_value=0, max_value=3), seed=st.integers(0, 99))
def test_the_pooled_verdict_is_window_slas_over_the_concatenation(
    ttft: list[float], misses: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    tpot = list(rng.uniform(0.0, 0.12, len(ttft)))
    half = len(ttft) // 2
    a = _sample(ttft[:half], tpot[:half], misses)
    b = _sample(ttft[half:], tpot[half:], 0)
    window = metrics.window_sla(
        ttft, tpot, ttft_p90_s=1.0, ttft_p99_s=2.0, tpot_p90_s=0.05, tpot_p99_s=0.1, misses=misses
    )
    assert pooled_verdict([a, b], [1, 1], SLA_) == window.violated
    # A weight of two is the sample counted twice.
    twice = metrics.window_sla(
        ttft[:half] * 2 + ttft[half:],
        tpot[:half] * 2 + tpot[half:],
        ttft_p90_s=1.0,
        ttft_p99_s=2.0,
        tpot_p90_s=0.05,
        tpot_p99_s=0.1,
        misses=2 * misses,
    )
    assert pooled_verdict([a, b], [2, 1], SLA_) == twice.violated


def test_trace_windows_judge_every_request_once_after_a_warm_up() -> None:
    requests = [Request(str(i), float(i), 10, 5) for i in range(100)]
    windows = trace_windows(requests, 5)
    judged = [r.id for w in windows for r in w.requests if r.arrival_s >= w.judged_from]
    assert sorted(judged, key=int) == [r.id for r in requests]
    assert windows[0].judged_from == 0.0
    assert all(math.isclose(w.judged_from, 9.9) for w in windows[1:])
    assert all(0.0 <= w.requests[0].arrival_s < 1.0 for w in windows)
