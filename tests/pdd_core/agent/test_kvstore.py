"""BlockCache: the KV blocks beside the radix index, and the added/removed hashes it reports."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.agent.kvstore import BlockCache
from pdd_core.engine.protocol import KVBlock, block_hashes
from pdd_core.engine.tiny import TinyConfig, TinyTransformer

ENGINE = TinyTransformer(TinyConfig(block_size=4))


def blocks_of(tokens: list[int]) -> list[KVBlock]:
    return ENGINE.export_blocks(ENGINE.prefill(tokens).kv)


def test_a_hit_gives_back_blocks_an_engine_can_prefill_on() -> None:
    cache = BlockCache(None, 4)
    prompt = list(range(1, 11))
    added, removed = cache.store(blocks_of(prompt))
    hashes = block_hashes([*prompt, 99], 4)

    held = cache.match(hashes)
    cached = ENGINE.import_blocks(cache.get(hashes[:held]))

    assert (len(added), removed, held) == (2, [], 2)  # two full blocks; the tail is not kept
    assert ENGINE.prefill([*prompt, 99], cached).first_token == ENGINE.generate([*prompt, 99], 1)[0]


def test_eviction_reports_the_hashes_that_left() -> None:
    cache = BlockCache(8, 4)  # two blocks
    cache.store(blocks_of([1, 2, 3, 4, 5, 6, 7, 8]))
    added, removed = cache.store(blocks_of([9, 9, 9, 9, 8, 8, 8, 8]))

    assert len(added) == 2
    assert sorted(removed) == sorted(block_hashes([1, 2, 3, 4, 5, 6, 7, 8], 4))
    assert set(cache.blocks) == set(added)


def test_pinned_blocks_are_not_evicted() -> None:
    cache = BlockCache(8, 4)
    first = [1, 2, 3, 4, 5, 6, 7, 8]
    cache.store(blocks_of(first))
    cache.pin(block_hashes(first, 4))
    added, removed = cache.store(blocks_of([9, 9, 9, 9]))

    assert (added, removed) == ([], [])
    assert cache.peek(block_hashes(first, 4)) == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=4, max_size=16), min_size=1, max_size=12))
def test_the_blocks_held_are_exactly_the_index(prompts: list[list[int]]) -> None:
    cache = BlockCache(16, 4)
    view: set[int] = set()
    chains: list[list[int]] = []
    for prompt in prompts:
        added, removed = cache.store(blocks_of(prompt))
        chains.append(block_hashes(prompt, 4))
        view |= set(added)
        view -= set(removed)
        in_index = {
            h for chain in chains for i, h in enumerate(chain)
            if cache.index.peek(chain[: i + 1]) == i + 1
        }  # fmt: skip
        assert set(cache.blocks) == view == in_index
        assert len(cache.index) == len(cache.blocks)


def test_an_eviction_looks_at_the_leaves_not_at_every_block_held() -> None:
    # Given a full cache of 50 unrelated prompts of 8 blocks (400 blocks, 50 leaves)
    cache = BlockCache(400 * 4, 4)
    for n in range(50):
        cache.store(blocks_of([n + 10] * 32))
    peeks: list[int] = []
    peek = cache.index.peek

    def counted(hashes: Sequence[int]) -> int:
        peeks.append(len(hashes))
        return peek(hashes)

    cache.index.peek = counted  # type: ignore[method-assign]

    # When one more prompt of 8 blocks pushes the 8 least recently used blocks out
    added, removed = cache.store(blocks_of([7] * 32))

    # Then the oldest prompt's chain is what left, found in at most one look per leaf and
    # per evicted block (not one per block held)
    assert (len(added), sorted(removed)) == (8, sorted(block_hashes([10] * 32, 4)))
    assert len(peeks) <= 50 + 8


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["store", "pin", "unpin"]),
            st.lists(st.integers(0, 2), min_size=4, max_size=16),
        ),
        min_size=1,
        max_size=16,
    )
)
def test_pins_keep_the_blocks_held_equal_to_the_index(steps: list[tuple[str, list[int]]]) -> None:
    cache = BlockCache(16, 4)
    pinned: list[list[int]] = []
    chains: list[list[int]] = []
    for action, prompt in steps:
        hashes = block_hashes(prompt, 4)
        if action == "store":
            cache.store(blocks_of(prompt))
            chains.append(hashes)
        elif action == "pin":
            pinned.append(hashes[: cache.pin(hashes)])  # as MD does: unpin what it pinned
        elif pinned:
            cache.unpin(pinned.pop())
        in_index = {
            h for chain in chains for i, h in enumerate(chain)
            if cache.index.peek(chain[: i + 1]) == i + 1
        }  # fmt: skip
        assert set(cache.blocks) == in_index
        assert len(cache.index) == len(cache.blocks)
