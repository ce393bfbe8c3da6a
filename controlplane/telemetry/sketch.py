"""A mergeable latency histogram: fixed log-spaced buckets, stored sparsely as JSON.

Percentiles of a window (and of any union of windows) come from summed bucket counts, so the
dashboard never loads and sorts raw records. The buckets are the same everywhere, which is what
makes two histograms mergeable by adding counts.

Resolution: ``BUCKETS_PER_DECADE`` = 20 buckets per factor of ten between ``MIN_VALUE`` (0.1 ms)
and ``MAX_VALUE`` (1000 s), so a bucket spans a factor ``GROWTH`` = 10^(1/20) ~ 1.122. A
percentile is reported as the geometric middle of the bucket that holds the nearest-rank order
statistic, so it is within a factor sqrt(GROWTH) ~ 1.059 (under 6 % relative error) of the exact
nearest-rank percentile. Values below ``MIN_VALUE`` report as ``MIN_VALUE``, values at or above
``MAX_VALUE`` as ``MAX_VALUE`` (an underflow and an overflow bucket hold them).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

BUCKETS_PER_DECADE = 20
MIN_VALUE = 1e-4
DECADES = 7
MAX_VALUE: float = MIN_VALUE * 10.0**DECADES
GROWTH: float = 10.0 ** (1 / BUCKETS_PER_DECADE)
# Bucket 0 is the underflow, 1..N-2 the log buckets, N-1 the overflow.
N_BUCKETS = BUCKETS_PER_DECADE * DECADES + 2
_OVERFLOW = N_BUCKETS - 1
# The relative error bound stated above, with room for floating-point rounding at the edges.
RELATIVE_ERROR = math.sqrt(GROWTH) * (1 + 1e-9) - 1

Histogram = dict[str, int]


def bucket_index(value: float) -> int:
    """The bucket of ``value`` (seconds)."""
    if value < MIN_VALUE:
        return 0
    if value >= MAX_VALUE:
        return N_BUCKETS - 1
    index = math.floor(math.log10(value / MIN_VALUE) * BUCKETS_PER_DECADE) + 1
    return min(max(index, 1), N_BUCKETS - 2)


def bucket_upper(index: int) -> float:
    """The exclusive upper edge of bucket ``index`` (infinity for the overflow bucket)."""
    if index >= N_BUCKETS - 1:
        return math.inf
    return MIN_VALUE * GROWTH**index


def representative(index: int) -> float:
    """The value a bucket reports: the geometric middle of its edges (clamped at the ends)."""
    if index <= 0:
        return MIN_VALUE
    if index >= N_BUCKETS - 1:
        return MAX_VALUE
    lower: float = MIN_VALUE * GROWTH ** (index - 1)
    return lower * math.sqrt(GROWTH)


def histogram_of(values: Iterable[float]) -> Histogram:
    """A sparse histogram (``{"bucket index": count}``) of ``values``."""
    # ``bucket_index`` inlined (one list of ints, counted, then named): a function call and a
    # string per value cost several times the arithmetic. For MIN_VALUE <= value < MAX_VALUE
    # the formula is at least 1; rounding can take it one past the last log bucket.
    log10, floor = math.log10, math.floor
    counted = Counter([
        0 if value < MIN_VALUE else _OVERFLOW if value >= MAX_VALUE
        else min(floor(log10(value / MIN_VALUE) * BUCKETS_PER_DECADE) + 1, _OVERFLOW - 1)
        for value in values
    ])  # fmt: skip
    return {str(index): count for index, count in counted.items()}


def merge(into: Histogram, other: Mapping[str, int]) -> Histogram:
    """Add ``other``'s counts to ``into`` (in place) and return it."""
    for key, count in other.items():
        into[key] = into.get(key, 0) + int(count)
    return into


def total(hist: Mapping[str, int]) -> int:
    return sum(int(c) for c in hist.values())


def quantile(hist: Mapping[str, int], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0-100) of the histogram; None when it is empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"q: must be within [0, 100], got {q!r}")
    n = total(hist)
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100 * n))
    seen = 0
    for index in sorted(int(k) for k in hist):
        seen += int(hist[str(index)])
        if seen >= rank:
            return representative(index)
    return representative(N_BUCKETS - 1)  # pragma: no cover - counts always reach n


def count_within(hist: Mapping[str, int], target: float) -> int:
    """How many values are at most ``target`` as ``quantile`` reports them: the values of the
    buckets whose reported value is at most ``target``. So ``count_within(h, t) / total(h) >=
    q / 100`` exactly when ``quantile(h, q) <= t``: an attainment and a percentile read from one
    histogram never disagree on whether a target is met."""
    return sum(int(c) for k, c in hist.items() if representative(int(k)) <= target)


def cumulative_below(hist: Mapping[str, int], edges: Iterable[int]) -> list[tuple[float, int]]:
    """``(upper edge, count of values in buckets up to it)`` at each bucket index in ``edges``;
    the Prometheus exposition uses a coarse subset of the edges as its ``le`` bounds."""
    counts = sorted((int(k), int(c)) for k, c in hist.items())
    result = []
    for edge in edges:
        result.append((bucket_upper(edge), sum(c for i, c in counts if i <= edge)))
    return result
