"""A radix prefix cache over block hashes, with pinning and LRU eviction to a token capacity.

Prefix caching is first class in PDD (DOMAIN.md section 3): P owns one, MD keeps a decode-side
one (the DRC of section 4), and the trace tool replays traces through one to measure hit rates.
This is the one implementation all of them use.

A request is a sequence of block hashes, one per ``block_size`` tokens. As in the Mooncake and
Qwen-Bailian traces, a block's identity is its position in a path: two requests share a block
only if they share every block before it, so the cache is a trie keyed by hash, and a hit is the
number of leading blocks whose path is present.

Eviction keeps a single ordered dict of the unpinned nodes. Every access touches a whole path
from its deepest node up to the root, so an ancestor is always more recently used than its
descendants; the least recently used unpinned node therefore never has children, and eviction is
an O(1) pop from the front. Pinning a node pins its ancestors too (their refcounts rise together),
so the unpinned nodes are closed under descent and the argument holds for them as well.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What the cache has seen through recorded ``match`` calls, and what it threw away.

    The request-weighted hit is the mean of per-request ratios; the token-weighted hit is hit
    tokens over input tokens (DOMAIN.md section 5 asks for both).
    """

    requests: int
    input_tokens: int
    hit_tokens: int
    request_hit_sum: float
    evicted_blocks: int

    @property
    def request_weighted_hit(self) -> float:
        """Mean of per-request hit ratios (0 before any request)."""
        return self.request_hit_sum / self.requests if self.requests else 0.0

    @property
    def token_weighted_hit(self) -> float:
        """Hit tokens over input tokens (0 before any request)."""
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0


class _Node:
    __slots__ = ("children", "key", "parent", "refs")

    def __init__(self, key: int, parent: _Node | None) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[int, _Node] = {}
        self.refs = 0


class RadixCache:
    """Prefix cache of KV blocks keyed by block-hash paths, bounded in tokens.

    ``capacity_tokens=None`` means unbounded (the "infinite cache" of trace statistics). Each
    cached block counts ``block_size`` tokens against the capacity, including a request's last,
    partial block: a KV allocator hands out whole blocks.
    """

    def __init__(self, capacity_tokens: int | None = None, block_size: int = 512) -> None:
        if block_size < 1:
            raise ValueError(f"block_size: must be positive, got {block_size!r}")
        if capacity_tokens is not None and capacity_tokens < 0:
            raise ValueError(f"capacity_tokens: must be non-negative, got {capacity_tokens!r}")
        self.block_size = block_size
        self.capacity_tokens = capacity_tokens
        self._capacity_blocks = None if capacity_tokens is None else capacity_tokens // block_size
        self._root = _Node(-1, None)
        self._blocks = 0
        # Unpinned nodes, least recently used first (see the module docstring for the order).
        self._lru: OrderedDict[_Node, None] = OrderedDict()
        self._requests = 0
        self._input_tokens = 0
        self._hit_tokens = 0
        self._request_hit_sum = 0.0
        self._evicted = 0

    def __len__(self) -> int:
        """Number of cached blocks."""
        return self._blocks

    @property
    def size_tokens(self) -> int:
        """Tokens of capacity in use (cached blocks x block size)."""
        return self._blocks * self.block_size

    @property
    def stats(self) -> CacheStats:
        """A snapshot of the hit statistics and the eviction count."""
        return CacheStats(
            requests=self._requests,
            input_tokens=self._input_tokens,
            hit_tokens=self._hit_tokens,
            request_hit_sum=self._request_hit_sum,
            evicted_blocks=self._evicted,
        )

    def reset_stats(self) -> None:
        """Zero the statistics but keep the cached blocks (e.g. after a warm-up period)."""
        self._requests = self._input_tokens = self._hit_tokens = self._evicted = 0
        self._request_hit_sum = 0.0

    def peek(self, hashes: Sequence[int]) -> int:
        """Leading blocks of ``hashes`` that are cached, without touching LRU order or stats.

        A router probing several caches to choose one must not make the losers look recently
        used.
        """
        node = self._root
        matched = 0
        for key in hashes:
            child = node.children.get(key)
            if child is None:
                break
            node = child
            matched += 1
        return matched

    def match(
        self, hashes: Sequence[int], input_tokens: int | None = None, *, record: bool = True
    ) -> int:
        """Number of leading blocks of ``hashes`` that are cached; marks them recently used.

        With ``record`` the lookup counts as one request in ``stats``: its hit tokens are
        ``min(matched x block_size, input_tokens)`` (the last block of a request is usually
        partial), and ``input_tokens`` defaults to ``len(hashes) x block_size``.
        """
        path = self._walk(hashes)
        self._touch(path)
        matched = len(path)
        if record:
            size = len(hashes) * self.block_size if input_tokens is None else input_tokens
            hit = min(matched * self.block_size, size)
            self._requests += 1
            self._input_tokens += size
            self._hit_tokens += hit
            self._request_hit_sum += hit / size if size > 0 else 0.0
        return matched

    def insert(self, hashes: Sequence[int]) -> int:
        """Cache the path ``hashes`` and return how many of its leading blocks are now cached.

        Missing blocks are added one at a time, each after evicting least recently used unpinned
        leaves if the cache is full. The path being inserted is pinned while that happens, so
        it never evicts itself; if nothing else can go, insertion stops there and the returned
        count is below ``len(hashes)`` (the prefix is kept, the tail is not cached).
        """
        capacity = self._capacity_blocks
        path = self._walk(hashes)
        missing = len(hashes) - len(path)
        if capacity is None or self._blocks + missing <= capacity:
            # Room for every missing block: nothing can be evicted, so no need to protect the
            # path; add the tail and touch the whole path as ``match`` does.
            node = path[-1] if path else self._root
            for key in hashes[len(path) :]:
                child = _Node(key, node)
                node.children[key] = child
                path.append(child)
                node = child
            self._blocks += missing
            lru = self._lru
            for node in reversed(path):
                if node.refs == 0:
                    lru[node] = None  # appends a new block; an old one keeps its place...
                    lru.move_to_end(node)  # ...until moved to the most recent end
            return len(path)
        return self._insert_evicting(hashes, capacity)

    def pin(self, hashes: Sequence[int]) -> int:
        """Protect the cached leading blocks of ``hashes`` from eviction; returns how many.

        Pins are counted per block, and a pinned block's ancestors are pinned with it. Release
        exactly what was pinned: ``n = cache.pin(h); ...; cache.unpin(h[:n])``.
        """
        path = self._walk(hashes)
        for node in path:
            if node.refs == 0:
                self._lru.pop(node, None)
            node.refs += 1
        return len(path)

    def unpin(self, hashes: Sequence[int]) -> None:
        """Release one pin on every block of ``hashes``; the blocks count as just used.

        Raises ``ValueError`` (changing nothing) if a block is not cached or not pinned, since
        that means the caller's pin accounting is wrong and silently ignoring it would leak pins.
        """
        path = self._walk(hashes)
        if len(path) != len(hashes):
            raise ValueError(f"hashes: block {len(path)} of the path is not cached")
        for index, node in enumerate(path):
            if node.refs == 0:
                raise ValueError(f"hashes: block {index} of the path is not pinned")
        self._release(path)

    def pinned_blocks(self) -> int:
        """Number of cached blocks with at least one pin (they cannot be evicted)."""
        return self._blocks - len(self._lru)

    def evict(self, blocks: int) -> int:
        """Evict up to ``blocks`` least recently used unpinned blocks; returns how many went.

        For a decode instance that must free KV memory for a new batch.
        """
        evicted = 0
        while evicted < blocks and self._evict_one():
            evicted += 1
        return evicted

    def _insert_evicting(self, hashes: Sequence[int], capacity: int) -> int:
        # The cached prefix is pinned (out of the LRU order) so that making room never evicts
        # the path itself. Evicting every block the tail needs first, then adding the tail,
        # removes the same blocks as evicting one before each addition would (the new blocks
        # are not in the LRU order while blocks go), and the evicted leaves are reused as the
        # new blocks' nodes. The new blocks then enter the LRU order deepest first, ahead of
        # the released prefix, exactly as releasing the whole pinned path would put them.
        lru = self._lru
        path = self._walk(hashes)
        for node in path:
            lru.pop(node, None)
            node.refs += 1
        missing = len(hashes) - len(path)
        need = self._blocks + missing - capacity
        spare: list[_Node] = []
        while len(spare) < need and lru:
            gone, _ = lru.popitem(last=False)
            parent = gone.parent
            assert parent is not None and not gone.children  # guaranteed by the LRU order
            del parent.children[gone.key]
            spare.append(gone)
        evicted = len(spare)
        self._evicted += evicted
        self._blocks -= evicted
        added = min(missing, capacity - self._blocks)
        node = path[-1] if path else self._root
        start = len(path)
        fresh: list[_Node] = []
        for key in hashes[start : start + added]:
            if spare:
                child = spare.pop()
                child.key = key
                child.parent = node
            else:
                child = _Node(key, node)
            node.children[key] = child
            fresh.append(child)
            node = child
        for gone in spare:  # evicted and not reused
            gone.parent = None
        self._blocks += added
        for child in reversed(fresh):
            lru[child] = None
        self._release(path)
        return start + added

    def _walk(self, hashes: Sequence[int]) -> list[_Node]:
        node = self._root
        path: list[_Node] = []
        for key in hashes:
            child = node.children.get(key)
            if child is None:
                break
            path.append(child)
            node = child
        return path

    def _touch(self, path: list[_Node]) -> None:
        # Deepest first, so every ancestor ends up more recent than its descendants.
        lru = self._lru
        for node in reversed(path):
            if node.refs == 0:
                lru.move_to_end(node)

    def _release(self, path: list[_Node]) -> None:
        # Deepest first, for the same ordering reason as _touch.
        lru = self._lru
        for node in reversed(path):
            node.refs -= 1
            if node.refs == 0:
                lru[node] = None

    def _evict_one(self) -> bool:
        if not self._lru:
            return False
        node, _ = self._lru.popitem(last=False)
        parent = node.parent
        assert parent is not None and not node.children  # guaranteed by the LRU order
        del parent.children[node.key]
        node.parent = None
        self._blocks -= 1
        self._evicted += 1
        return True
