"""Block hash chains (the identity caches and the wire share) and the paced async facade."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.cache import RadixCache
from pdd_core.engine.protocol import (
    ROOT_HASH,
    KVBlock,
    PacedEngine,
    SequenceKV,
    block_hashes,
    chain_hash,
    check_cached_prefix,
    check_chain,
)
from pdd_core.engine.tiny import TinyTransformer
from pdd_core.engine.tokenizer import BOS, EOS, ByteTokenizer

tokens_lists = st.lists(st.integers(0, 300), max_size=80)


@given(tokens_lists, tokens_lists)
def test_two_sequences_share_exactly_the_hashes_of_their_common_full_blocks(
    a: list[int], b: list[int]
) -> None:
    size = 8
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1

    ha, hb = block_hashes(a, size), block_hashes(b, size)

    shared = 0
    while shared < min(len(ha), len(hb)) and ha[shared] == hb[shared]:
        shared += 1
    assert shared == min(common // size, len(ha), len(hb))
    # The radix cache sees the same reuse.
    cache = RadixCache(block_size=size)
    cache.insert(ha)
    assert cache.peek(hb) == shared


@given(tokens_lists.filter(bool), st.integers(0, 79))
def test_a_chain_verifies_and_any_changed_token_breaks_it(tokens: list[int], at: int) -> None:
    size = 8
    hashes = block_hashes(tokens, size, partial=True)
    blocks = [
        KVBlock(i, h, tuple(tokens[i * size : (i + 1) * size]), b"") for i, h in enumerate(hashes)
    ]

    assert check_chain(blocks, size) == tokens
    at %= len(tokens)
    index = at // size
    changed = list(blocks[index].tokens)
    changed[at % size] += 1
    blocks[index] = KVBlock(index, hashes[index], tuple(changed), b"")
    with pytest.raises(ValueError, match=f"block {index}: hash"):
        check_chain(blocks, size)


def test_only_full_blocks_are_hashed_unless_partial_is_asked_for() -> None:
    assert len(block_hashes(list(range(20)), 8)) == 2
    assert len(block_hashes(list(range(20)), 8, partial=True)) == 3
    assert block_hashes(list(range(20)), 8) == block_hashes(list(range(20)), 8, partial=True)[:2]


def test_a_full_hit_still_recomputes_the_last_prompt_token() -> None:
    cached = SequenceKV([1, 2, 3], block_size=2)

    assert check_cached_prefix([1, 2, 3], cached) == 2
    assert check_cached_prefix([1, 2, 3, 4], cached) == 3
    assert check_cached_prefix([1, 2, 3, 4], None) == 0


def test_tokenizer_round_trips_text_and_never_fails_on_ids() -> None:
    tokenizer = ByteTokenizer()
    text = "héllo, 世界"

    ids = tokenizer.encode(text)

    assert ids[0] == BOS
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode([0xE4, EOS, 104]) == "\ufffdh"


async def test_paced_tiny_engine_offloads_and_gives_the_same_tokens() -> None:
    engine = TinyTransformer()
    prompt = ByteTokenizer().encode("offloaded")

    result = await PacedEngine(engine, offload=True).prefill(prompt)

    assert result.first_token == engine.prefill(prompt).first_token
    assert result.seconds == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=2**32 - 1), max_size=200),
    st.integers(min_value=1, max_value=40),
    st.booleans(),
)
def test_block_hashes_equal_the_chain_of_chain_hash(
    tokens: list[int], block_size: int, partial: bool
) -> None:
    expected, parent = [], ROOT_HASH
    stop = len(tokens) if partial else len(tokens) - len(tokens) % block_size
    for start in range(0, stop, block_size):
        parent = chain_hash(parent, tokens[start : min(start + block_size, stop)])
        expected.append(parent)

    assert block_hashes(tokens, block_size, partial=partial) == expected


async def test_a_paced_operation_ends_its_modelled_seconds_after_it_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from pdd_core.engine import protocol

    clock = [100.0]
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds
        await real_sleep(0)

    class Slow:
        """An engine whose host bookkeeping takes 0.3 s of a 1.0 s modelled prefill."""

        block_size, vocab_size = 4, 16

        def prefill(self, tokens: list[int], cached: object = None) -> protocol.PrefillResult:
            clock[0] += 0.3
            return protocol.PrefillResult(None, 1, 1.0)  # type: ignore[arg-type]

    monkeypatch.setattr("pdd_core.engine.protocol.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("pdd_core.engine.protocol.asyncio.sleep", sleep)

    await PacedEngine(Slow()).prefill([1, 2, 3])  # type: ignore[arg-type]

    assert slept == [pytest.approx(0.7)]
    assert clock[0] == pytest.approx(101.0)
