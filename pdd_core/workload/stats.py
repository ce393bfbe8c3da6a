"""Statistics of a workload: sizes, arrival rate, and prefix hits replayed through a RadixCache.

``pdd trace stats`` prints these, the generator's tests measure its shape with them, and the
planner will characterise a workload with them, so hit rates are computed in exactly one way:
replay the requests in arrival order through ``RadixCache`` (match, then insert), count a
request's hit tokens as ``min(matched blocks x block_size, input tokens)``, and summarise with
the helpers of ``pdd_core.metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pdd_core.cache import RadixCache
from pdd_core.metrics import (
    hit_band_labels,
    hit_band_shares,
    mean,
    percentiles,
    request_weighted_hit,
    share_at_least,
    token_weighted_hit,
)
from pdd_core.workload.request import Request

# "Above 95%" in DOMAIN.md section 3's agentic shape (70-80% of requests).
HIGH_HIT_THRESHOLD = 0.95


@dataclass(frozen=True, slots=True)
class Distribution:
    """Mean and the reported percentiles of one per-request quantity."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        """Summarise ``values`` (NaN everywhere when there are none)."""
        p = percentiles(values, (50.0, 90.0, 99.0))
        return cls(mean=mean(values), p50=p["p50"], p90=p["p90"], p99=p["p99"])


@dataclass(frozen=True, slots=True)
class TraceStats:
    """Everything ``pdd trace stats`` reports about one workload."""

    requests: int
    skipped: int
    duration_s: float
    rate_per_s: float
    input_tokens: Distribution
    output_tokens: Distribution
    block_size: int | None
    cache_tokens: int | None
    request_weighted_hit: float
    token_weighted_hit: float
    share_high_hit: float
    hit_bands: tuple[tuple[str, float], ...]
    evicted_blocks: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (``--json`` output and control-plane storage)."""
        return {
            "requests": self.requests,
            "skipped": self.skipped,
            "duration_s": self.duration_s,
            "rate_per_s": self.rate_per_s,
            "input_tokens": _distribution_dict(self.input_tokens),
            "output_tokens": _distribution_dict(self.output_tokens),
            "block_size": self.block_size,
            "cache_tokens": self.cache_tokens,
            "hit": {
                "request_weighted": self.request_weighted_hit,
                "token_weighted": self.token_weighted_hit,
                "share_at_least_95": self.share_high_hit,
                "bands": dict(self.hit_bands),
            },
            "evicted_blocks": self.evicted_blocks,
        }


def replay_hits(
    requests: Sequence[Request], block_size: int, cache_tokens: int | None = None
) -> tuple[list[int], int]:
    """Hit tokens of each request (in the order given) and the blocks evicted on the way.

    Requests are replayed in arrival order (ties keep their order) through one cache of
    ``cache_tokens`` (None: infinite); each is matched, then inserted, so a request never hits
    on its own blocks. Requests without hashes hit nothing.
    """
    cache = RadixCache(capacity_tokens=cache_tokens, block_size=block_size)
    hits = [0] * len(requests)
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    for i in order:
        request = requests[i]
        matched = cache.match(request.block_hashes, request.input_tokens)
        hits[i] = min(matched * block_size, request.input_tokens)
        cache.insert(request.block_hashes)
    return hits, cache.stats.evicted_blocks


def trace_stats(
    requests: Sequence[Request],
    *,
    block_size: int | None,
    cache_tokens: int | None = None,
    skipped: int = 0,
) -> TraceStats:
    """Compute the statistics of ``requests`` with a prefix cache of ``cache_tokens`` tokens.

    ``block_size`` is tokens per hash (None for traces without hashes, which then hit nothing).
    """
    inputs = [r.input_tokens for r in requests]
    outputs = [r.output_tokens for r in requests]
    if block_size is None:
        hits, evicted = [0] * len(requests), 0
    else:
        hits, evicted = replay_hits(requests, block_size, cache_tokens)
    ratios = [h / n if n > 0 else 0.0 for h, n in zip(hits, inputs, strict=True)]
    arrivals = [r.arrival_s for r in requests]
    duration = max(arrivals) - min(arrivals) if arrivals else 0.0
    return TraceStats(
        requests=len(requests),
        skipped=skipped,
        duration_s=duration,
        rate_per_s=len(requests) / duration if duration > 0 else 0.0,
        input_tokens=Distribution.of(inputs),
        output_tokens=Distribution.of(outputs),
        block_size=block_size,
        cache_tokens=cache_tokens,
        request_weighted_hit=request_weighted_hit(hits, inputs),
        token_weighted_hit=token_weighted_hit(hits, inputs),
        share_high_hit=share_at_least(ratios, HIGH_HIT_THRESHOLD),
        hit_bands=tuple(zip(hit_band_labels(), hit_band_shares(ratios), strict=True)),
        evicted_blocks=evicted,
    )


def _distribution_dict(d: Distribution) -> dict[str, float]:
    return {"mean": d.mean, "p50": d.p50, "p90": d.p90, "p99": d.p99}
