"""A prefix cache that holds the KV blocks themselves: P's prefix cache and MD's DRC.

``RadixCache`` decides which block-hash paths stay (LRU, pins, capacity); this keeps the
``KVBlock`` of every cached hash beside it, so a hit can be turned into the ``cached`` sequence
an engine prefills on top of (P) or imports before the received blocks (MD). It reports which
hashes entered and left, which the agent forwards to gateways as ``CACHE_EVENT`` frames: the
live view the router uses to predict hits at each instance.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdd_core.cache import RadixCache
from pdd_core.engine.protocol import ROOT_HASH, KVBlock


class BlockCache:
    """Full KV blocks indexed by hash path, bounded in tokens, with pins for blocks in use."""

    def __init__(self, capacity_tokens: int | None, block_size: int) -> None:
        self.index = RadixCache(capacity_tokens, block_size)
        self.block_size = block_size
        self.blocks: dict[int, KVBlock] = {}
        self._parent: dict[int, int] = {}
        self._children: dict[int, int] = {}  # held block -> how many held blocks extend it
        self._leaves: set[int] = set()  # held blocks no held block extends

    def match(self, hashes: Sequence[int], input_tokens: int | None = None) -> int:
        """Leading blocks of ``hashes`` held (marks them used and counts the lookup)."""
        return self.index.match(hashes, input_tokens)

    def peek(self, hashes: Sequence[int]) -> int:
        return self.index.peek(hashes)

    def get(self, hashes: Sequence[int]) -> list[KVBlock]:
        """The blocks of a matched prefix, in chain order."""
        return [self.blocks[h] for h in hashes]

    def pin(self, hashes: Sequence[int]) -> int:
        return self.index.pin(hashes)

    def unpin(self, hashes: Sequence[int]) -> None:
        self.index.unpin(hashes)

    def store(self, blocks: Sequence[KVBlock]) -> tuple[list[int], list[int]]:
        """Cache the full blocks of a chain; returns ``(added, removed)`` hashes.

        ``removed`` are blocks the index evicted to make room; their bytes go with them.
        """
        full = [b for b in blocks if len(b.tokens) == self.block_size]
        kept = self.index.insert([b.block_hash for b in full])
        added: list[int] = []
        parent = ROOT_HASH
        for block in full[:kept]:
            if block.block_hash not in self.blocks:
                self.blocks[block.block_hash] = block
                self._parent[block.block_hash] = parent
                self._children[block.block_hash] = 0
                self._leaves.add(block.block_hash)
                if parent != ROOT_HASH:
                    self._children[parent] += 1
                    self._leaves.discard(parent)
                added.append(block.block_hash)
            parent = block.block_hash
        gone = len(self.blocks) - len(self.index)
        return added, self._sweep(gone) if gone > 0 else []

    def _sweep(self, gone: int) -> list[int]:
        """Drop the ``gone`` blocks the index evicted, found from the leaves up.

        The index evicts only leaves (``RadixCache``: a node's children go before it), so the
        evicted blocks are the held leaves no longer in it, then the parents that this leaves
        childless, and so on: the search visits the leaves and the evicted blocks, not every
        block held (which cost a full cache a tenth of a second per store, stalling P's
        worker between passes).
        """
        removed: list[int] = []
        candidates = list(self._leaves)
        while candidates and len(removed) < gone:
            block_hash = candidates.pop()
            path = self._path(block_hash)
            if self.index.peek(path) == len(path):
                continue
            removed.append(block_hash)
            parent = self._parent.pop(block_hash)
            del self.blocks[block_hash], self._children[block_hash]
            self._leaves.discard(block_hash)
            if parent != ROOT_HASH:
                self._children[parent] -= 1
                if self._children[parent] == 0:
                    self._leaves.add(parent)
                    candidates.append(parent)
        return removed

    def _path(self, block_hash: int) -> list[int]:
        path = [block_hash]
        while (parent := self._parent.get(path[-1], ROOT_HASH)) != ROOT_HASH:
            path.append(parent)
        path.reverse()
        return path
