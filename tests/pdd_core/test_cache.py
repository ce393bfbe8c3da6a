"""RadixCache: prefix semantics, LRU eviction, pins, statistics, agreement with a naive oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.cache import RadixCache
from tests.pdd_core.radix_reference import NaiveRadixCache


def test_empty_cache_matches_nothing() -> None:
    cache = RadixCache(block_size=16)

    assert cache.match([1, 2, 3]) == 0
    assert len(cache) == 0


def test_match_counts_leading_blocks_of_the_same_path() -> None:
    cache = RadixCache(block_size=16)
    cache.insert([1, 2, 3])

    assert cache.match([1, 2, 3, 4]) == 3
    assert cache.match([1, 2, 9]) == 2
    # A block is identified by its whole path: 2 after 1 is not 2 at the start.
    assert cache.match([2, 3]) == 0
    assert len(cache) == 3
    assert cache.size_tokens == 48


def test_insert_shares_common_prefixes() -> None:
    cache = RadixCache(block_size=16)

    assert cache.insert([1, 2, 3]) == 3
    assert cache.insert([1, 2, 4, 5]) == 4

    assert len(cache) == 5


def test_eviction_removes_least_recently_used_leaf_first() -> None:
    # Given a cache of 4 blocks holding paths [1, 2] and [3, 4], with [1, 2] used last
    cache = RadixCache(capacity_tokens=64, block_size=16)
    cache.insert([1, 2])
    cache.insert([3, 4])
    cache.match([1, 2])

    # When a fifth block arrives
    cache.insert([5])

    # Then the leaf of the least recently used path went, and only it
    assert cache.peek([3, 4]) == 1
    assert cache.peek([1, 2]) == 2
    assert cache.peek([5]) == 1
    assert len(cache) == 4
    assert cache.stats.evicted_blocks == 1


def test_insert_larger_than_capacity_keeps_its_prefix() -> None:
    cache = RadixCache(capacity_tokens=3 * 16, block_size=16)
    cache.insert([7, 8])

    assert cache.insert([1, 2, 3, 4, 5]) == 3

    assert cache.peek([1, 2, 3, 4, 5]) == 3
    assert cache.peek([7]) == 0
    assert len(cache) == 3


def test_zero_capacity_caches_nothing() -> None:
    cache = RadixCache(capacity_tokens=0, block_size=16)

    assert cache.insert([1, 2]) == 0
    assert len(cache) == 0


def test_pinned_blocks_and_their_ancestors_survive_pressure() -> None:
    cache = RadixCache(capacity_tokens=4 * 16, block_size=16)
    cache.insert([1, 2, 3])
    assert cache.pin([1, 2, 3, 99]) == 3

    inserted = cache.insert([4, 5, 6])

    # Only one free block was left, and pinned blocks were not touched to make room.
    assert inserted == 1
    assert cache.peek([1, 2, 3]) == 3
    assert cache.pinned_blocks() == 3

    cache.unpin([1, 2, 3])
    assert cache.pinned_blocks() == 0
    assert cache.insert([4, 5, 6]) == 3
    assert cache.peek([1, 2, 3]) == 1


def test_pins_are_counted() -> None:
    cache = RadixCache(capacity_tokens=2 * 16, block_size=16)
    cache.insert([1, 2])
    cache.pin([1, 2])
    cache.pin([1])
    cache.unpin([1, 2])

    # [1] is still pinned once; [2] is free again.
    assert cache.pinned_blocks() == 1
    assert cache.evict(5) == 1
    assert cache.peek([1, 2]) == 1


def test_unpin_of_a_block_not_pinned_raises_and_changes_nothing() -> None:
    cache = RadixCache(block_size=16)
    cache.insert([1, 2])
    cache.pin([1])

    with pytest.raises(ValueError, match="block 1 of the path is not pinned"):
        cache.unpin([1, 2])
    with pytest.raises(ValueError, match="block 2 of the path is not cached"):
        cache.unpin([1, 2, 3])

    assert cache.pinned_blocks() == 1


def test_peek_does_not_change_lru_order() -> None:
    cache = RadixCache(capacity_tokens=2 * 16, block_size=16)
    cache.insert([1])
    cache.insert([2])
    cache.peek([1])

    cache.insert([3])

    assert cache.peek([1]) == 0
    assert cache.peek([2]) == 1


def test_stats_are_request_and_token_weighted() -> None:
    # Block size 10. Request A: 25 tokens, 3 blocks, nothing cached -> 0 of 25.
    # Request B: 30 tokens, 3 blocks, 2 cached -> 20 of 30 (2/3).
    # Request C: 5 tokens, 1 block, cached; hit capped at its 5 tokens -> 5 of 5.
    cache = RadixCache(block_size=10)
    cache.match([1, 2, 3], input_tokens=25)
    cache.insert([1, 2, 3])
    cache.match([1, 2, 4], input_tokens=30)
    cache.match([1], input_tokens=5)
    cache.match([1], record=False)

    stats = cache.stats
    assert stats.requests == 3
    assert stats.input_tokens == 60
    assert stats.hit_tokens == 25
    assert stats.token_weighted_hit == pytest.approx(25 / 60)
    assert stats.request_weighted_hit == pytest.approx((0 + 2 / 3 + 1) / 3)

    cache.reset_stats()
    assert cache.stats.requests == 0
    assert len(cache) == 3


def test_constructor_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="block_size"):
        RadixCache(block_size=0)
    with pytest.raises(ValueError, match="capacity_tokens"):
        RadixCache(capacity_tokens=-1)


# --- properties against the naive oracle ---------------------------------------------------

# Small alphabets and short paths so random sequences share prefixes and collide often.
paths = st.lists(st.integers(min_value=0, max_value=3), min_size=0, max_size=6)
operations = st.lists(
    st.tuples(st.sampled_from(["match", "insert", "pin", "unpin", "evict"]), paths),
    max_size=60,
)


def _same_contents(fast: RadixCache, slow: NaiveRadixCache) -> bool:
    # The fast cache is prefix-closed; same size and containing every oracle path means equal.
    return len(fast) == len(slow) and all(fast.peek(p) == len(p) for p in slow.paths())


def _run(
    ops: list[tuple[str, list[int]]], capacity_blocks: int | None, block_size: int = 4
) -> None:
    capacity = None if capacity_blocks is None else capacity_blocks * block_size
    fast = RadixCache(capacity_tokens=capacity, block_size=block_size)
    slow = NaiveRadixCache(capacity_tokens=capacity, block_size=block_size)
    pinned: list[list[int]] = []
    for op, path in ops:
        if op == "match":
            assert fast.match(path) == slow.match(path)
        elif op == "insert":
            assert fast.insert(path) == slow.insert(path)
        elif op == "pin":
            n = fast.pin(path)
            assert n == slow.pin(path)
            pinned.append(path[:n])
        elif op == "unpin" and pinned:
            held = pinned.pop(len(path) % len(pinned))
            fast.unpin(held)
            slow.unpin(held)
        elif op == "evict":
            assert fast.evict(len(path)) == slow.evict(len(path))
        assert _same_contents(fast, slow)
        if capacity_blocks is not None:
            assert len(fast) <= capacity_blocks
        for held in pinned:
            assert fast.peek(held) == len(held)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_infinite_cache_agrees_with_naive_reference(ops: list[tuple[str, list[int]]]) -> None:
    _run(ops, capacity_blocks=None)


@settings(max_examples=500, deadline=None)
@given(operations, st.integers(min_value=0, max_value=8))
def test_bounded_cache_agrees_with_naive_lru(
    ops: list[tuple[str, list[int]]], capacity_blocks: int
) -> None:
    # Same matches, same evictions, never above capacity, pinned paths always present.
    _run(ops, capacity_blocks=capacity_blocks)


@settings(max_examples=200, deadline=None)
@given(st.lists(paths, max_size=40), st.integers(min_value=1, max_value=6))
def test_never_above_capacity_and_hits_never_exceed_request(
    requests: list[list[int]], capacity_blocks: int
) -> None:
    cache = RadixCache(capacity_tokens=capacity_blocks * 8, block_size=8)
    for path in requests:
        hit = cache.match(path)
        assert 0 <= hit <= len(path)
        cache.insert(path)
        assert cache.size_tokens <= capacity_blocks * 8
    assert cache.stats.requests == len(requests)


# Long paths cut from a few shared stems, so that accesses end inside, diverge from and extend
# the compressed runs of the cache (a split on nearly every operation), with large evictions
# that trim runs in part and in whole.
stems = st.lists(st.integers(min_value=0, max_value=2), min_size=12, max_size=24)
long_paths = st.tuples(
    st.integers(min_value=0, max_value=2),
    st.integers(min_value=0, max_value=24),
    st.lists(st.integers(min_value=3, max_value=4), max_size=4),
)
long_operations = st.lists(
    st.tuples(st.sampled_from(["match", "insert", "pin", "unpin", "evict"]), long_paths),
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(stems, min_size=3, max_size=3),
    long_operations,
    st.one_of(st.none(), st.integers(min_value=0, max_value=20)),
)
def test_runs_split_and_trimmed_agree_with_naive_lru(
    bases: list[list[int]],
    ops: list[tuple[str, tuple[int, int, list[int]]]],
    capacity_blocks: int | None,
) -> None:
    # Path = a prefix of one stem plus a short suffix of its own; an eviction takes as many
    # blocks as the suffix has (0 to 4), so that what goes first is seen, not only what stays.
    _run(
        [
            (op, suffix if op == "evict" else bases[stem][:cut] + suffix)
            for op, (stem, cut, suffix) in ops
        ],
        capacity_blocks=capacity_blocks,
    )


def test_an_access_inside_a_run_keeps_the_rest_of_it_least_recently_used() -> None:
    # Given a full cache: one run of four blocks and a later, separate path
    cache = RadixCache(capacity_tokens=5 * 16, block_size=16)
    cache.insert([1, 2, 3, 4])
    cache.insert([7])
    # When the first two blocks of the run are used again and two new blocks need room
    assert cache.match([1, 2]) == 2
    assert cache.insert([8, 9]) == 2

    # Then the untouched deep half of the run went first, deepest block first
    assert cache.peek([1, 2, 3, 4]) == 2
    assert cache.peek([7]) == 1
    assert cache.stats.evicted_blocks == 2
    # And one more block evicts the older of [7] and [1, 2]: [7] was used before the match
    assert cache.evict(1) == 1
    assert cache.peek([7]) == 0
    assert cache.peek([1, 2]) == 2


def test_unpin_of_part_of_a_pinned_run_releases_only_that_part() -> None:
    cache = RadixCache(capacity_tokens=4 * 16, block_size=16)
    cache.insert([1, 2, 3])
    assert cache.pin([1, 2, 3]) == 3
    assert cache.pin([1]) == 1

    cache.unpin([1, 2, 3])

    # Block 1 still holds its second pin; 2 and 3 are free to go
    assert cache.pinned_blocks() == 1
    assert cache.evict(5) == 2
    assert cache.peek([1, 2, 3]) == 1
    with pytest.raises(ValueError, match="block 1 of the path is not cached"):
        cache.unpin([1, 2])
