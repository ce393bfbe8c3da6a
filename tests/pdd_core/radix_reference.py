"""A deliberately naive RadixCache with the same contract, used as the oracle of property tests.

Every cached block is a whole prefix tuple in a dict, every lookup rebuilds tuples, and eviction
scans every block for the least recently used unpinned leaf. It is slow (linear per eviction,
quadratic per lookup), but each rule of the contract is one obvious line, so when it and
``pdd_core.cache.RadixCache`` agree on random operation sequences the fast one is right.
``bench/bench_cache.py`` also times it.
"""

from __future__ import annotations

from collections.abc import Sequence


class NaiveRadixCache:
    """Same public methods as ``RadixCache`` (match, peek, insert, pin, unpin, evict, len)."""

    def __init__(self, capacity_tokens: int | None = None, block_size: int = 512) -> None:
        self.block_size = block_size
        self.capacity_blocks = None if capacity_tokens is None else capacity_tokens // block_size
        # prefix -> [last use tick, pin count]
        self.entries: dict[tuple[int, ...], list[int]] = {}
        # prefix -> number of cached one-block extensions (so "is a leaf" is one lookup)
        self.children: dict[tuple[int, ...], int] = {}
        self.tick = 0

    def __len__(self) -> int:
        return len(self.entries)

    def paths(self) -> set[tuple[int, ...]]:
        return set(self.entries)

    def peek(self, hashes: Sequence[int]) -> int:
        n = 0
        while n < len(hashes) and tuple(hashes[: n + 1]) in self.entries:
            n += 1
        return n

    def match(self, hashes: Sequence[int]) -> int:
        n = self.peek(hashes)
        # Deepest first: a prefix is always used at least as recently as its extensions.
        for length in range(n, 0, -1):
            entry = self.entries[tuple(hashes[:length])]
            if entry[1] == 0:
                entry[0] = self._next_tick()
        return n

    def insert(self, hashes: Sequence[int]) -> int:
        path: list[tuple[int, ...]] = []
        for length in range(1, len(hashes) + 1):
            prefix = tuple(hashes[:length])
            if prefix not in self.entries:
                limit = self.capacity_blocks
                full = limit is not None and len(self.entries) >= limit
                if full and not self._evict_one():
                    break
                self.entries[prefix] = [0, 0]
                self.children[prefix[:-1]] = self.children.get(prefix[:-1], 0) + 1
            self.entries[prefix][1] += 1
            path.append(prefix)
        self._release(path)
        return len(path)

    def pin(self, hashes: Sequence[int]) -> int:
        n = self.peek(hashes)
        for length in range(1, n + 1):
            self.entries[tuple(hashes[:length])][1] += 1
        return n

    def unpin(self, hashes: Sequence[int]) -> None:
        path = [tuple(hashes[:length]) for length in range(1, len(hashes) + 1)]
        for prefix in path:
            if prefix not in self.entries or self.entries[prefix][1] == 0:
                raise ValueError("not pinned")
        self._release(path)

    def evict(self, blocks: int) -> int:
        evicted = 0
        while evicted < blocks and self._evict_one():
            evicted += 1
        return evicted

    def is_pinned(self, prefix: tuple[int, ...]) -> bool:
        return prefix in self.entries and self.entries[prefix][1] > 0

    def _release(self, path: list[tuple[int, ...]]) -> None:
        for prefix in reversed(path):
            entry = self.entries[prefix]
            entry[1] -= 1
            if entry[1] == 0:
                entry[0] = self._next_tick()

    def _evict_one(self) -> bool:
        candidates = [
            prefix
            for prefix, (_, refs) in self.entries.items()
            if refs == 0 and not self.children.get(prefix)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=lambda prefix: self.entries[prefix][0])
        del self.entries[victim]
        self.children[victim[:-1]] -= 1
        return True

    def _next_tick(self) -> int:
        self.tick += 1
        return self.tick
