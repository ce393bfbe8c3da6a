"""Fixed-length requests at Poisson arrivals: the workload of a serving benchmark.

Configurators and engine benchmarks (NVIDIA AIConfigurator, vLLM's ``benchmark_serving`` with
random inputs, genai-perf's synthetic inputs) state a workload as an input length (ISL), an
output length (OSL) and a rate or concurrency, with no prefix reuse between requests. This
generator writes exactly that so a scenario can put the project's figures beside theirs:
``requests`` requests of ``input_tokens`` in and ``output_tokens`` out, each with its own
block hashes (no request hits another's prefix), arriving as a Poisson process of
``rate_per_s``. Each request is its own session, so ``sim.capacity.scale_sessions`` raises the
rate by adding requests, as a benchmark raises its request rate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from pdd_core.workload.request import Request


@dataclass(frozen=True, slots=True)
class FixedWorkload:
    """Parameters of ``generate_fixed`` (see the module docstring)."""

    requests: int = 1000
    rate_per_s: float = 1.0
    input_tokens: int = 4096
    output_tokens: int = 500
    block_size: int = 512

    def __post_init__(self) -> None:
        for name in ("requests", "input_tokens", "output_tokens", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if not self.rate_per_s > 0:
            raise ValueError(f"rate_per_s: must be positive, got {self.rate_per_s!r}")


def generate_fixed(params: FixedWorkload | None = None, seed: int = 0) -> list[Request]:
    """``params.requests`` requests of fixed lengths, Poisson arrivals (numpy PCG64, seeded).

    Arrival times are whole milliseconds (as the agentic generator's), so a Mooncake JSON
    round trip is exact.
    """
    p = params or FixedWorkload()
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / p.rate_per_s, p.requests)
    blocks = math.ceil(p.input_tokens / p.block_size)
    fresh = itertools.count()
    requests = []
    now = 0.0
    for index in range(p.requests):
        now += float(gaps[index])
        requests.append(
            Request(
                id=f"f{index:06d}",
                arrival_s=round(now * 1000) / 1000,
                input_tokens=p.input_tokens,
                output_tokens=p.output_tokens,
                block_hashes=tuple(next(fresh) for _ in range(blocks)),
            )
        )
    return requests
