"""A radix prefix cache over block hashes, with pinning and LRU eviction to a token capacity.

Prefix caching is first class in PDD (DOMAIN.md section 3): P owns one, MD keeps a decode-side
one (the DRC of section 4), and the trace tool replays traces through one to measure hit rates.
This is the one implementation all of them use.

A request is a sequence of block hashes, one per ``block_size`` tokens. As in the Mooncake and
Qwen-Bailian traces, a block's identity is its position in a path: two requests share a block
only if they share every block before it, so the cache is a trie keyed by hash, and a hit is the
number of leading blocks whose path is present.

The trie is path-compressed: a node holds a run of consecutive blocks (``keys``), so a walk
costs one dict lookup and one tuple comparison (in C) per run instead of a Python step per block.
A conversation's turn usually adds a run and splits the previous one at its partial last block,
so a 64K-token prompt of 512-token blocks is about 8 runs in the reference scenario's simulations
instead of about 130 blocks.

Eviction is per block, least recently used first, and its order is exactly that of a per-block
trie with one ordered dict of the unpinned blocks, where every access moves its path to the
most recent end deepest block first, so an ancestor is always more recent than its descendants
and the least recently used unpinned block never has children. Pinning a block pins its
ancestors too (their refcounts rise together), so the unpinned blocks are closed under descent
and the argument holds for them as well. The compressed trie keeps that order with one ordered
dict of unpinned *runs*, each run standing for its blocks deepest first, because every run
obeys one invariant: its blocks have the same refcount and are used together. An access that
ends inside a run (or diverges from it) first splits it in two, the deeper part keeping the
run's place in the order, so every access touches, pins or releases whole runs; a run's blocks
enter the order together and leave it only together (pins) or from the front (evictions), so
they stay adjacent and deepest first. Eviction therefore trims blocks off the tail of the least
recently used run, which has no children. Runs are split, never merged back, so the trie is at
worst the per-block one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pdd_core.metrics import hit_ratio


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
        return hit_ratio(self.hit_tokens, self.input_tokens)


class _Node:
    """A run of consecutive blocks of one path: same refcount, used together (module docstring)."""

    __slots__ = ("children", "keys", "parent", "refs")

    def __init__(self, keys: tuple[int, ...], parent: _Node | None, refs: int = 0) -> None:
        self.keys = keys
        self.parent = parent
        # Child runs by their first block's hash.
        self.children: dict[int, _Node] = {}
        self.refs = refs


def _common(keys: tuple[int, ...], hashes: tuple[int, ...], start: int) -> int:
    """Leading blocks of ``keys`` equal to ``hashes[start:]``, given that the first one is and
    not all of ``keys`` are: a binary search on tuple-slice equality (each comparison in C)."""
    # The longest possible answer first: a conversation's next turn usually leaves a run at its
    # last block (the previous turn's partial block), or a shorter path ends inside it.
    high = min(len(keys) - 1, len(hashes) - start)
    if keys[:high] == hashes[start : start + high]:
        return high
    low, high = 1, high - 1
    while low < high:
        mid = (low + high + 1) // 2
        if keys[:mid] == hashes[start : start + mid]:
            low = mid
        else:
            high = mid - 1
    return low


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
        self._root = _Node((), None)
        self._blocks = 0
        # Unpinned runs, least recently used first (see the module docstring for the order),
        # and the blocks they hold.
        self._lru: OrderedDict[_Node, None] = OrderedDict()
        self._unpinned = 0
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
        # ``_descend``'s walk without the runs and the partial count: every arrival peeks at
        # each candidate's cache, so the calls and the tuples it returns are saved here.
        if not isinstance(hashes, tuple):
            hashes = tuple(hashes)
        node = self._root
        done = 0
        size = len(hashes)
        while done < size:
            child = node.children.get(hashes[done])
            if child is None:
                break
            keys = child.keys
            end = done + len(keys)
            if hashes[done:end] != keys:
                return done + _common(keys, hashes, done)
            done = end
            node = child
        return done

    def match(
        self, hashes: Sequence[int], input_tokens: int | None = None, *, record: bool = True
    ) -> int:
        """Number of leading blocks of ``hashes`` that are cached; marks them recently used.

        With ``record`` the lookup counts as one request in ``stats``: its hit tokens are
        ``min(matched x block_size, input_tokens)`` (the last block of a request is usually
        partial), and ``input_tokens`` defaults to ``len(hashes) x block_size``.
        """
        path, matched = self._walk(tuple(hashes))
        self._touch(path)
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
        hashes = tuple(hashes)
        capacity = self._capacity_blocks
        path, matched = self._walk(hashes)
        missing = len(hashes) - matched
        if capacity is not None and self._blocks + missing > capacity:
            return self._insert_evicting(hashes, path, matched, capacity)
        # Room for every missing block: nothing can be evicted, so no need to protect the
        # path; add the tail as one run and touch the whole path as ``match`` does.
        if missing:
            parent = path[-1] if path else self._root
            tail = _Node(hashes[matched:], parent)
            parent.children[hashes[matched]] = tail
            path.append(tail)
            self._blocks += missing
            self._unpinned += missing
            self._lru[tail] = None  # at the most recent end; the touch orders it
        self._touch(path)
        return len(hashes)

    def pin(self, hashes: Sequence[int]) -> int:
        """Protect the cached leading blocks of ``hashes`` from eviction; returns how many.

        Pins are counted per block, and a pinned block's ancestors are pinned with it. Release
        exactly what was pinned: ``n = cache.pin(h); ...; cache.unpin(h[:n])``.
        """
        path, matched = self._walk(tuple(hashes))
        self._pin(path)
        return matched

    def unpin(self, hashes: Sequence[int]) -> None:
        """Release one pin on every block of ``hashes``; the blocks count as just used.

        Raises ``ValueError`` (changing nothing) if a block is not cached or not pinned, since
        that means the caller's pin accounting is wrong and silently ignoring it would leak pins.
        """
        hashes = tuple(hashes)
        # Checked before any split: splitting an unpinned run would move part of it in the LRU.
        runs, matched, _ = self._find(hashes)
        if matched != len(hashes):
            raise ValueError(f"hashes: block {matched} of the path is not cached")
        start = 0
        for node in runs:
            if node.refs == 0:
                raise ValueError(f"hashes: block {start} of the path is not pinned")
            start += len(node.keys)
        self._release(self._walk(hashes)[0])

    def pinned_blocks(self) -> int:
        """Number of cached blocks with at least one pin (they cannot be evicted)."""
        return self._blocks - self._unpinned

    def evict(self, blocks: int) -> int:
        """Evict up to ``blocks`` least recently used unpinned blocks; returns how many went.

        For a decode instance that must free KV memory for a new batch.
        """
        return self._evict(blocks)

    def _insert_evicting(
        self, hashes: tuple[int, ...], path: list[_Node], matched: int, capacity: int
    ) -> int:
        # The cached prefix is pinned (out of the LRU order) so that making room never evicts
        # the path itself. Evicting every block the tail needs first, then adding the tail,
        # removes the same blocks as evicting one before each addition would (the new blocks
        # are not in the LRU order while blocks go). The new blocks then enter the LRU order as
        # one run, ahead of the released prefix, exactly as releasing the whole pinned path
        # would put them.
        self._pin(path)
        missing = len(hashes) - matched
        self._evict(self._blocks + missing - capacity)
        added = min(missing, capacity - self._blocks)
        if added > 0:
            parent = path[-1] if path else self._root
            tail = _Node(hashes[matched : matched + added], parent)
            parent.children[hashes[matched]] = tail
            self._blocks += added
            self._unpinned += added
            self._lru[tail] = None
        self._release(path)
        return matched + added

    def _find(self, hashes: tuple[int, ...]) -> tuple[list[_Node], int, int]:
        """The runs ``hashes`` reaches, the blocks matched, and how many blocks of the last run
        matched if only part of it did (else 0); changes nothing."""
        runs: list[_Node] = []
        matched, partial = self._descend(hashes, runs)
        return runs, matched, partial

    def _descend(self, hashes: tuple[int, ...], runs: list[_Node] | None) -> tuple[int, int]:
        """``_find``'s walk: the blocks matched and the partial count, appending the runs
        reached to ``runs`` unless it is None (a peek needs only the count)."""
        node = self._root
        done = 0
        size = len(hashes)
        while done < size:
            child = node.children.get(hashes[done])
            if child is None:
                break
            if runs is not None:
                runs.append(child)
            keys = child.keys
            end = done + len(keys)
            if hashes[done:end] != keys:
                partial = _common(keys, hashes, done)
                return done + partial, partial
            done = end
            node = child
        return done, 0

    def _walk(self, hashes: tuple[int, ...]) -> tuple[list[_Node], int]:
        """The runs of the cached prefix of ``hashes`` and its blocks, splitting the run it
        ends inside (if any) so that the path is made of whole runs."""
        runs, matched, partial = self._find(hashes)
        if partial:
            runs[-1] = self._split(runs[-1], partial)
        return runs, matched

    def _split(self, node: _Node, head_blocks: int) -> _Node:
        """Cut ``node`` after its first ``head_blocks`` blocks; returns the new upper run.

        The lower part keeps the node (its children, pins and place in the LRU order); the
        upper part joins the most recent end of the order if unpinned, so the caller must touch
        or pin it at once (every caller does, as the access that split it).
        """
        keys = node.keys
        parent = node.parent
        assert parent is not None
        head = _Node(keys[:head_blocks], parent, node.refs)
        parent.children[keys[0]] = head
        node.keys = keys[head_blocks:]
        node.parent = head
        head.children[node.keys[0]] = node
        if head.refs == 0:
            self._lru[head] = None
        return head

    def _pin(self, path: list[_Node]) -> None:
        lru = self._lru
        for node in path:
            if node.refs == 0:
                del lru[node]
                self._unpinned -= len(node.keys)
            node.refs += 1

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
                self._unpinned += len(node.keys)

    def _evict(self, blocks: int) -> int:
        # The least recently used run has no children (module docstring); its deepest blocks
        # go first, the whole run when ``blocks`` covers it.
        lru = self._lru
        evicted = 0
        while evicted < blocks and lru:
            # Taken off the front in one call (a run usually goes whole); a run only trimmed
            # goes back to the front, where it was.
            node, _ = lru.popitem(last=False)
            keys = node.keys
            parent = node.parent
            assert parent is not None and not node.children  # guaranteed by the LRU order
            take = blocks - evicted
            if take >= len(keys):
                del parent.children[keys[0]]
                node.parent = None
                take = len(keys)
            else:
                node.keys = keys[:-take]
                lru[node] = None
                lru.move_to_end(node, last=False)
            evicted += take
        self._unpinned -= evicted
        self._blocks -= evicted
        self._evicted += evicted
        return evicted
