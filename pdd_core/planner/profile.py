"""The workload as the planner sees it: per-request samples of input, hit and output, plus rates.

The analytic model (``capacity.py``) needs distributions, not a trace: the planner replays the
trace once through a prefix cache of P's size (the same ``replay_hits`` as ``pdd trace stats``)
to get each request's hit, then keeps a deterministic sample of (input, hit, output) triples,
the mean arrival rate and the squared coefficient of variation of inter-arrival times (agent
sessions arrive in bursts; Kingman's formula needs that burstiness).

The bathtub (DOMAIN.md section 7) varies the mean hit rate of this profile. ``with_mean_hit``
does it with a power transform of each request's hit ratio, ``h' = h ** a``, solved for the mean:
a request at 100% stays there, one at 0% stays there, and the skew of section 3 (most requests
near the top, a thin low-hit tail) keeps its shape while the mean moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from pdd_core import metrics
from pdd_core.workload import Request, replay_hits

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class WorkloadProfile:
    """Samples of one workload and its arrival statistics (see the module docstring).

    ``input_tokens``, ``hit_tokens`` and ``output_tokens`` are aligned arrays, one entry per
    sampled request; ``rate_rps`` is requests per second over the whole trace; ``arrival_cv2``
    the squared coefficient of variation of inter-arrival times (1 for Poisson); ``sessions``
    how many sessions the ``requests`` belong to (a request without one is its own; 0: not
    known, as many as requests).
    """

    rate_rps: float
    arrival_cv2: float
    input_tokens: FloatArray
    hit_tokens: FloatArray
    output_tokens: FloatArray
    requests: int
    sessions: int = 0

    @property
    def turns_per_session(self) -> float:
        """Mean requests per session (1 when sessions are not known)."""
        return self.requests / self.sessions if 0 < self.sessions <= self.requests else 1.0

    @property
    def miss_tokens(self) -> FloatArray:
        return self.input_tokens - self.hit_tokens

    @property
    def hit_ratio(self) -> FloatArray:
        """Each sampled request's ``metrics.hit_ratio``, vectorised (0 where no input)."""
        return np.divide(
            self.hit_tokens,
            self.input_tokens,
            out=np.zeros_like(self.hit_tokens),
            where=self.input_tokens > 0,
        )

    @property
    def mean_hit(self) -> float:
        """Request-weighted mean hit (DOMAIN.md section 5), the bathtub's x axis."""
        return float(self.hit_ratio.mean()) if self.hit_ratio.size else 0.0

    @property
    def token_hit(self) -> float:
        return metrics.hit_ratio(float(self.hit_tokens.sum()), float(self.input_tokens.sum()))

    def with_mean_hit(self, target: float) -> WorkloadProfile:
        """The same requests with hit ratios ``h ** a`` whose request-weighted mean is ``target``.

        Bisection on ``log a``; targets outside what the transform can reach (every ratio is 0
        or 1 already) are clipped to the nearest reachable mean.
        """
        ratios = np.clip(self.hit_ratio, 0.0, 1.0)
        target = min(max(target, 0.0), 1.0)
        lo, hi = -12.0, 12.0  # log2 of the exponent; 2**12 ~ 0, 2**-12 ~ 1 for ratios in (0, 1)
        for _ in range(60):
            mid = (lo + hi) / 2
            mean = float(np.power(ratios, 2.0**mid).mean())
            if mean > target:
                lo = mid
            else:
                hi = mid
        shaped = np.power(ratios, 2.0 ** ((lo + hi) / 2))
        hits = np.floor(shaped * self.input_tokens)
        return replace(self, hit_tokens=np.minimum(hits, self.input_tokens))

    def scaled(self, factor: float) -> WorkloadProfile:
        """The same workload arriving ``factor`` times as fast."""
        return replace(self, rate_rps=self.rate_rps * factor)

    def at_rate(self, rate_rps: float) -> WorkloadProfile:
        """The same workload arriving at ``rate_rps``."""
        return replace(self, rate_rps=rate_rps)


def profile_from_requests(
    requests: Sequence[Request],
    *,
    block_size: int,
    cache_tokens: int | None,
    max_samples: int = 2000,
    seed: int = 0,
) -> WorkloadProfile:
    """Replay ``requests`` through one prefix cache and sample them (deterministic for a seed).

    The cache is one P instance's (``SimConfig.prefix_cache_tokens``): the router sends a
    session back to the P that holds its prefix, so per-instance caches see what one cache of
    that size sees. Requests with no hashes (Azure traces) hit nothing.
    """
    if not requests:
        raise ValueError("workload: no requests to plan for")
    ordered = sorted(requests, key=lambda r: r.arrival_s)
    hits, _ = replay_hits(ordered, block_size, cache_tokens)
    inputs = np.array([max(r.input_tokens, 1) for r in ordered], dtype=float)
    outputs = np.array([max(r.output_tokens, 1) for r in ordered], dtype=float)
    hit = np.minimum(np.array(hits, dtype=float), inputs - 1)
    span = ordered[-1].arrival_s - ordered[0].arrival_s
    rate = (len(ordered) - 1) / span if span > 0 and len(ordered) > 1 else 1.0
    gaps = np.diff(np.array([r.arrival_s for r in ordered], dtype=float))
    cv2 = float(gaps.var() / gaps.mean() ** 2) if gaps.size > 1 and gaps.mean() > 0 else 1.0
    index = np.arange(len(ordered))
    if len(ordered) > max_samples:
        rng = np.random.default_rng(seed)
        index = np.sort(rng.choice(len(ordered), size=max_samples, replace=False))
    return WorkloadProfile(
        rate_rps=rate,
        arrival_cv2=max(cv2, 0.0),
        input_tokens=inputs[index],
        hit_tokens=np.maximum(hit[index], 0.0),
        output_tokens=outputs[index],
        requests=len(ordered),
        sessions=len({r.session or r.id for r in ordered}),
    )
