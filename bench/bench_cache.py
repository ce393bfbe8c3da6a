"""RadixCache match+insert throughput replaying the Mooncake conversation trace.

Prints operations per second (one operation = one request's match followed by its insert) for
``pdd_core.cache.RadixCache`` and, in the same run on the same requests, for the naive
reference the property tests use (``tests/pdd_core/radix_reference.py``), with their ratio. The
naive cache scans every block on each eviction, so its bounded-cache row replays a prefix of
the trace only; both implementations replay exactly the same requests in every row.

Run: ``.venv/bin/python bench/bench_cache.py`` (reads ``../shared/data``; falls back to the
200-request sample in ``fixtures/traces`` when that folder is absent).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pdd_core.cache import RadixCache  # noqa: E402
from pdd_core.workload import Request, read_trace  # noqa: E402
from tests.pdd_core.radix_reference import NaiveRadixCache  # noqa: E402

FULL_TRACE = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"
SAMPLE_TRACE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"
BLOCK_SIZE = 512


class Cache(Protocol):
    def match(self, hashes: Sequence[int]) -> int: ...
    def insert(self, hashes: Sequence[int]) -> int: ...


def replay(
    make: Callable[[], Cache], requests: Sequence[Request], repeat: int = 1
) -> tuple[float, int]:
    """Best seconds over ``repeat`` runs to match+insert every request into a fresh cache, and
    the total matched blocks (a checksum both implementations must agree on)."""
    best = float("inf")
    matched = 0
    for _ in range(repeat):
        cache = make()
        matched = 0
        start = time.perf_counter()
        for request in requests:
            matched += cache.match(request.block_hashes)
            cache.insert(request.block_hashes)
        best = min(best, time.perf_counter() - start)
    return best, matched


def main() -> None:
    path = FULL_TRACE if FULL_TRACE.exists() else SAMPLE_TRACE
    requests = read_trace(path).requests
    blocks = sum(len(r.block_hashes) for r in requests)
    print(f"trace: {path} ({len(requests)} requests, {blocks} blocks)")
    scenarios: list[tuple[str, Sequence[Request], int | None]] = [
        ("infinite cache", requests, None),
        ("10M-token LRU cache", requests, 10_000_000),
        ("first 1000 req, 256K-token LRU", requests[:1000], 256_000),
    ]
    print(f"{'scenario':<30}{'requests':>9}{'radix ops/s':>14}{'naive ops/s':>14}{'ratio':>8}")
    for name, subset, capacity in scenarios:

        def fast(capacity: int | None = capacity) -> Cache:
            return RadixCache(capacity_tokens=capacity, block_size=BLOCK_SIZE)

        def slow(capacity: int | None = capacity) -> Cache:
            return NaiveRadixCache(capacity_tokens=capacity, block_size=BLOCK_SIZE)

        fast_s, fast_hits = replay(fast, subset, repeat=3)
        # The naive cache scans every block per eviction; on the full trace with a bounded
        # cache that is hours, so it only runs on the short bounded row.
        if capacity is not None and len(subset) > 1000:
            print(f"{name:<30}{len(subset):>9}{len(subset) / fast_s:>14,.0f}{'(skipped)':>14}")
            continue
        slow_s, slow_hits = replay(slow, subset, repeat=1 if capacity else 3)
        if slow_hits != fast_hits:
            raise SystemExit(f"{name}: implementations disagree ({fast_hits} != {slow_hits})")
        print(
            f"{name:<30}{len(subset):>9}{len(subset) / fast_s:>14,.0f}"
            f"{len(subset) / slow_s:>14,.0f}{slow_s / fast_s:>7.1f}x"
        )


if __name__ == "__main__":
    main()
