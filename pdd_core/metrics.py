"""Summary statistics every report of the product shares: percentiles and prefix-hit rates.

DOMAIN.md section 5 asks for hit rates both request-weighted (the mean of per-request ratios) and
token-weighted (hit tokens over input tokens), because on skewed agent traffic the two differ
widely; section 3 describes the skew as shares of requests per hit band. Keeping these helpers in
one place means the trace tool, the simulator, the planner and the dashboards cannot disagree on
what "hit rate" or "P99" means.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

# Hit bands of DOMAIN.md section 3 (agent traffic: most requests above 95%, a thin low-hit tail).
# Each band is [lower, upper) except the last, which also holds exactly 1.0, so every ratio in
# [0, 1] falls in exactly one band.
HIT_BAND_EDGES: tuple[float, ...] = (0.0, 0.20, 0.40, 0.70, 0.90, 0.95, 0.99, 1.0)
# The bands' upper edges but the last (a ratio below the i-th is in band i at most).
_BAND_UPPERS = HIT_BAND_EDGES[1:-1]

# The percentiles the product reports by default (SLA targets are stated at P90 and P99).
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)


def hit_band_labels() -> tuple[str, ...]:
    """Labels such as ``"90-95%"`` for the bands of ``HIT_BAND_EDGES``, in order.

    Tables and JSON output use the same labels so a reader can match a CLI line to a chart.
    """
    return tuple(f"{round(lo * 100)}-{round(hi * 100)}%" for lo, hi in pairwise(HIT_BAND_EDGES))


def hit_band_index(ratio: float) -> int:
    """Index of the band a hit ratio falls in; ratios are clamped into [0, 1].

    Clamping rather than raising keeps a rounding error (1.0000000002) from crashing a report.
    """
    value = min(max(ratio, 0.0), 1.0)
    # The first upper edge above ``value`` (the last band when none is, NaN included): one
    # bisection instead of a scan, as a run's summary bins every request.
    return bisect_right(_BAND_UPPERS, value)


def hit_band_shares(ratios: Iterable[float]) -> tuple[float, ...]:
    """Share of requests in each hit band (sums to 1; all zeros for no requests).

    This is the histogram that shows the agentic shape of DOMAIN.md section 3 at a glance.
    """
    counts = [0] * (len(HIT_BAND_EDGES) - 1)
    total = 0
    for ratio in ratios:
        counts[hit_band_index(ratio)] += 1
        total += 1
    if total == 0:
        return tuple(0.0 for _ in counts)
    return tuple(c / total for c in counts)


def share_at_least(ratios: Iterable[float], threshold: float) -> float:
    """Share of requests whose hit ratio is at least ``threshold`` (0 for no requests).

    "70-80% of requests above 95%" is checked with this at 0.95, which equals the sum of the two
    top bands, so the headline figure and the band table agree.
    """
    hits = 0
    total = 0
    for ratio in ratios:
        total += 1
        hits += ratio >= threshold
    return hits / total if total else 0.0


def hit_ratio(hit_tokens: float, input_tokens: float) -> float:
    """One request's prefix-hit ratio, hit over input tokens; 0 for a request with no input
    (it counts as a zero hit rather than being dropped). Every hit rate of the product, per
    request or over a window's totals, is this rule (DOMAIN.md section 5)."""
    return hit_tokens / input_tokens if input_tokens > 0 else 0.0


def request_weighted_hit(hit_tokens: Sequence[float], input_tokens: Sequence[float]) -> float:
    """Mean over requests of ``hit / input`` (DOMAIN.md section 5); 0 for no requests.

    Each request counts once whatever its length, so this is what a typical request sees.
    Requests with no input tokens count as a zero hit rather than being dropped silently.
    """
    _check_pairs(hit_tokens, input_tokens)
    if not input_tokens:
        return 0.0
    total = 0.0
    for hit, size in zip(hit_tokens, input_tokens, strict=True):
        total += hit_ratio(hit, size)
    return total / len(input_tokens)


def token_weighted_hit(hit_tokens: Sequence[float], input_tokens: Sequence[float]) -> float:
    """Hit tokens over input tokens (DOMAIN.md section 5); 0 when there is no input.

    This is the share of prefill compute and KV bytes a cache saves, so long requests weigh more.
    """
    _check_pairs(hit_tokens, input_tokens)
    return hit_ratio(math.fsum(hit_tokens), math.fsum(input_tokens))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; NaN for no values.

    NaN rather than an exception because an empty window is a normal state of a live dashboard.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"q: must be within [0, 100], got {q!r}")
    if len(values) == 0:
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=float), q))


def percentiles(
    values: Sequence[float], qs: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, float]:
    """Several percentiles at once, keyed ``"p50"``, ``"p90"``... (one sort for all of them).

    The keys are what JSON reports and the control plane's telemetry use.
    """
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"qs: must be within [0, 100], got {q!r}")
    keys = [f"p{q:g}" for q in qs]
    if len(values) == 0:
        return dict.fromkeys(keys, math.nan)
    result = np.percentile(np.asarray(values, dtype=float), list(qs))
    return {key: float(v) for key, v in zip(keys, result, strict=True)}


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; NaN for no values (same reason as ``percentile``)."""
    return math.fsum(values) / len(values) if len(values) else math.nan


def _check_pairs(hit_tokens: Sequence[float], input_tokens: Sequence[float]) -> None:
    if len(hit_tokens) != len(input_tokens):
        raise ValueError("hit_tokens: must have one entry per input_tokens entry")


# ---- the one definition of "SLA met" ---------------------------------------------------------
#
# Every part of the product (simulator, planner, gateway records, control-plane rollups) decides
# SLA attainment with these two functions, so a "met" means the same thing everywhere:
#
# - one request meets the SLA when it was served (not rejected, not failed) with TTFT at most
#   ``ttft_p90_s`` and mean TPOT at most ``tpot_p90_s`` (the tighter, P90 targets: a request
#   that misses them is one the operator counts against the P90 budget);
# - a window of requests meets the SLA when its TTFT P90 and P99 and its TPOT P90 and P99 are
#   at most the four targets, where every rejected or failed request counts as an infinitely
#   late one (so shedding load cannot buy a met SLA).


def request_meets_sla(
    ttft_s: float,
    tpot_s: float,
    ttft_target_s: float,
    tpot_target_s: float,
    *,
    served: bool = True,
) -> bool:
    """Whether one request met the SLA (see above); NaN times, or not served, never meet it.

    Plain numbers in, so a gateway record and a control-plane row can call it as they are:
    pass ``SLA.ttft_p90_s`` and ``SLA.tpot_p90_s`` as the targets.
    """
    return served and ttft_s <= ttft_target_s and tpot_s <= tpot_target_s


@dataclass(frozen=True, slots=True)
class SlaWindow:
    """The verdict on a window of requests (see ``window_sla``).

    Percentiles count misses (rejected, failed) as infinite, so they may be ``inf``;
    ``attainment`` is good requests over all requests; ``violated`` names the first target
    broken (``"ttft_p90"``...), empty when met; an empty window is not met (``"no requests"``).
    """

    met: bool
    requests: int
    good: int
    misses: int
    attainment: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    violated: str


def window_sla(
    ttft_s: Sequence[float],
    tpot_s: Sequence[float],
    *,
    ttft_p90_s: float,
    ttft_p99_s: float,
    tpot_p90_s: float,
    tpot_p99_s: float,
    misses: int = 0,
) -> SlaWindow:
    """Whether a window of requests met the SLA (see above).

    ``ttft_s`` and ``tpot_s`` hold one value per *served* request (TPOT 0 for a one-token
    answer), ``misses`` counts the rejected and failed ones. The targets are ``SLA``'s fields,
    passed as plain numbers.
    """
    _check_pairs(ttft_s, tpot_s)
    if misses < 0:
        raise ValueError(f"misses: must be non-negative, got {misses!r}")
    total = len(ttft_s) + misses
    good = sum(
        1
        for ttft, tpot in zip(ttft_s, tpot_s, strict=True)
        if request_meets_sla(ttft, tpot, ttft_p90_s, tpot_p90_s)
    )
    ttft = _percentiles_with_misses(ttft_s, misses, (90.0, 99.0))
    tpot = _percentiles_with_misses(tpot_s, misses, (90.0, 99.0))
    checks = (
        ("ttft_p90", ttft[0], ttft_p90_s),
        ("ttft_p99", ttft[1], ttft_p99_s),
        ("tpot_p90", tpot[0], tpot_p90_s),
        ("tpot_p99", tpot[1], tpot_p99_s),
    )
    violated = "no requests" if total == 0 else ""
    for name, value, target in checks:
        if not violated and not value <= target:
            violated = name
    return SlaWindow(
        met=not violated,
        requests=total,
        good=good,
        misses=misses,
        attainment=good / total if total else 0.0,
        ttft_p90_s=ttft[0],
        ttft_p99_s=ttft[1],
        tpot_p90_s=tpot[0],
        tpot_p99_s=tpot[1],
        violated=violated,
    )


def _percentiles_with_misses(
    values: Sequence[float], misses: int, qs: Sequence[float]
) -> tuple[float, ...]:
    """Linear-interpolation percentiles of ``values`` plus ``misses`` infinite values.

    NaN values (a request served without a figure) count as misses too. Equal to
    ``percentile`` when there are no misses; ``inf`` when the rank reaches the misses.
    """
    finite = sorted(v for v in values if not math.isnan(v))
    misses += len(values) - len(finite)
    n = len(finite) + misses
    if n == 0:
        return tuple(math.nan for _ in qs)
    out = []
    for q in qs:
        position = q / 100.0 * (n - 1)
        low = math.floor(position)
        high = math.ceil(position)
        if high >= len(finite):  # the rank reaches (or interpolates towards) a miss
            out.append(math.inf)
            continue
        out.append(finite[low] + (finite[high] - finite[low]) * (position - low))
    return tuple(out)
