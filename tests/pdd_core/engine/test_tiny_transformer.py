"""TinyTransformer proves the PDD mechanism: every pipeline yields one process's greedy tokens.

Engines A (P), R (RLD) and B (MD) are separate instances built from one seeded config, as the
agents' processes will be. KV crosses between them only as exported blocks encoded into wire
frames and decoded again, so these tests cover the same bytes the agents will send.
"""

from __future__ import annotations

import numpy as np
import pytest

from pdd_core.agent.protocol import (
    FrameType,
    KVBlockPayload,
    decode_frame,
    encode_frame,
    kv_block_frame,
    parse_kv_block,
)
from pdd_core.engine.protocol import DecodeState, Engine, EngineError, KVBlock, block_hashes
from pdd_core.engine.tiny import TinyConfig, TinyKV, TinyTransformer
from pdd_core.engine.tokenizer import ByteTokenizer

CONFIG = TinyConfig()
PROMPT = ByteTokenizer().encode("Relay decode hides the WAN: tokens first, KV later.")
TOTAL = 40  # output tokens per request in the pipeline tests
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def reference() -> list[int]:
    return TinyTransformer(CONFIG).generate(PROMPT, TOTAL)


def ship(blocks: list[KVBlock]) -> list[KVBlock]:
    """Send blocks through the wire encoding and back, as the agents will."""
    out = []
    for block in blocks:
        payload = KVBlockPayload(block.block_hash, block.index, block.tokens, block.data)
        decoded = decode_frame(encode_frame(kv_block_frame("req", payload)))
        assert decoded is not None and decoded[0].type is FrameType.KV_BLOCK
        got = parse_kv_block(decoded[0])
        out.append(KVBlock(got.index, got.block_hash, got.tokens, got.data))
    return out


def decode_until(engine: TinyTransformer, state: DecodeState, out: list[int], total: int) -> None:
    while len(out) < total:
        out.append(engine.decode_step([state]).tokens[0])


def as_tiny(kv: object) -> TinyKV:
    assert isinstance(kv, TinyKV)
    return kv


def test_it_implements_the_engine_protocol() -> None:
    assert isinstance(TinyTransformer(CONFIG), Engine)


def test_reference_output_is_varied_so_identity_tests_mean_something(reference: list[int]) -> None:
    assert len(reference) == TOTAL
    assert len(set(reference)) >= 10


def test_two_instances_of_one_config_are_the_same_model(reference: list[int]) -> None:
    assert TinyTransformer(TinyConfig()).generate(PROMPT, TOTAL) == reference
    assert TinyTransformer(TinyConfig(seed=1)).generate(PROMPT, TOTAL) != reference


def test_p_md_prefill_on_a_decode_on_b(reference: list[int]) -> None:
    prefill, main = TinyTransformer(CONFIG), TinyTransformer(CONFIG)
    result = prefill.prefill(PROMPT)

    kv = main.import_blocks(ship(prefill.export_blocks(result.kv)))
    out = [result.first_token]
    decode_until(main, DecodeState("r", kv, result.first_token), out, TOTAL)

    assert out == reference
    # KV that travels as bytes arrives bit-identical.
    np.testing.assert_array_equal(
        as_tiny(kv).token_kv()[:, :, :, : len(PROMPT)], as_tiny(result.kv).token_kv()
    )


def _relay(n: int) -> tuple[TinyTransformer, list[int], DecodeState, TinyKV]:
    """P prefills on A; R decodes ``n`` tokens; B holds the prefill KV. Returns B's view."""
    prefill, relay, main = (TinyTransformer(CONFIG) for _ in range(3))
    result = prefill.prefill(PROMPT)
    blocks = prefill.export_blocks(result.kv)
    relay_state = DecodeState("r", relay.import_blocks(ship(blocks)), result.first_token)
    emitted = [result.first_token]
    decode_until(relay, relay_state, emitted, n)
    main_kv = main.import_blocks(ship(blocks))
    return main, emitted, relay_state, as_tiny(main_kv)


@pytest.mark.parametrize("n", range(1, 19))
def test_p_rld_md_one_shot_handoff_after_n_tokens(n: int, reference: list[int]) -> None:
    main, emitted, relay_state, main_kv = _relay(n)

    extended = main.extend(main_kv, emitted)  # only the token IDs cross
    out = [*emitted, extended.next_token]
    decode_until(main, DecodeState("r", extended.kv, extended.next_token), out, TOTAL)

    assert out == reference
    # R's KV for the handed-over tokens (one more step gives it the last one's KV too)
    # equals what B recomputed.
    relay_next = TinyTransformer(CONFIG).decode_step([relay_state]).tokens[0]
    assert relay_next == extended.next_token
    span = slice(len(PROMPT), len(PROMPT) + n)
    relay_kv = as_tiny(relay_state.kv).token_kv()[:, :, :, span]
    main_recomputed = as_tiny(extended.kv).token_kv()[:, :, :, span]
    assert main_recomputed.shape[3] == n
    assert np.allclose(main_recomputed, relay_kv, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("chunk", [2, 3, 5])
@pytest.mark.parametrize("n", [1, 2, 4, 7, 10, 13, 17])
def test_p_rld_md_extend_decode_handoff_in_chunks(n: int, chunk: int, reference: list[int]) -> None:
    main, emitted, relay_state, kv = _relay(n)
    relay = TinyTransformer(CONFIG)
    absorbed = 0
    rounds = 0
    while len(emitted) - absorbed > chunk:
        # MD absorbs one chunk while RLD keeps decoding one more token.
        step = main.extend(kv, emitted[absorbed : absorbed + chunk])
        kv, absorbed = as_tiny(step.kv), absorbed + chunk
        assert step.next_token == emitted[absorbed]  # MD already agrees with what RLD sent
        decode_until(relay, relay_state, emitted, len(emitted) + 1)
        rounds += 1
    final = main.extend(kv, emitted[absorbed:])  # RLD stops: MD has caught up
    out = [*emitted, final.next_token]
    decode_until(main, DecodeState("r", final.kv, final.next_token), out, TOTAL)

    assert out == reference
    assert rounds == max(0, -(-(n - chunk) // (chunk - 1)))
    overlap = slice(len(PROMPT), len(relay_state.kv))
    assert np.allclose(
        as_tiny(final.kv).token_kv()[:, :, :, overlap],
        as_tiny(relay_state.kv).token_kv()[:, :, :, overlap],
        rtol=RTOL,
        atol=ATOL,
    )


@pytest.mark.parametrize("cached_tokens", [16, 20, 32, len(PROMPT)])
def test_prefill_over_a_cached_prefix_equals_a_full_prefill(cached_tokens: int) -> None:
    engine = TinyTransformer(CONFIG)
    full = engine.prefill(PROMPT)
    prefix = engine.prefill(PROMPT[:cached_tokens])
    cached = engine.import_blocks(ship(engine.export_blocks(prefix.kv)))

    reused = engine.prefill(PROMPT, cached)

    assert reused.first_token == full.first_token
    assert reused.kv.tokens == list(PROMPT)
    assert np.allclose(as_tiny(reused.kv).token_kv(), as_tiny(full.kv).token_kv(), RTOL, ATOL)
    # The cached KV object is not modified by the requests that reuse it.
    assert cached.tokens == list(PROMPT[:cached_tokens])


def test_a_prefix_that_does_not_match_the_prompt_is_refused() -> None:
    engine = TinyTransformer(CONFIG)
    other = engine.prefill([1, 2, 3]).kv

    with pytest.raises(EngineError, match="not a prefix"):
        engine.prefill(PROMPT, other)


def test_batched_decode_equals_decoding_each_sequence_alone() -> None:
    engine = TinyTransformer(CONFIG)
    prompts = [PROMPT, PROMPT[:9], ByteTokenizer().encode("another prompt, longer than a block")]
    alone = [engine.generate(p, 8) for p in prompts]

    states, outs = [], []
    for index, prompt in enumerate(prompts):
        result = engine.prefill(prompt)
        states.append(DecodeState(str(index), result.kv, result.first_token))
        outs.append([result.first_token])
    for _ in range(7):
        for out, token in zip(outs, engine.decode_step(states).tokens, strict=True):
            out.append(token)

    assert outs == alone


def test_exported_blocks_are_named_by_the_hash_chain_of_their_tokens() -> None:
    engine = TinyTransformer(CONFIG)
    kv = engine.prefill(PROMPT).kv

    blocks = engine.export_blocks(kv)
    tail = engine.export_blocks(kv, start_block=2)

    assert [b.block_hash for b in blocks] == block_hashes(PROMPT, CONFIG.block_size, partial=True)
    assert [len(b.tokens) for b in blocks] == [16, 16, 16, len(PROMPT) - 48]
    assert all(len(b.data) == len(b.tokens) * CONFIG.kv_bytes_per_token for b in blocks)
    assert tail == blocks[2:]


def test_import_rejects_a_broken_chain() -> None:
    engine = TinyTransformer(CONFIG)
    blocks = engine.export_blocks(engine.prefill(PROMPT).kv)
    first = blocks[0]

    with pytest.raises(EngineError, match="block 0: has index 1"):
        engine.import_blocks(blocks[1:])
    with pytest.raises(EngineError, match="hash does not match"):
        engine.import_blocks([KVBlock(0, first.block_hash ^ 1, first.tokens, first.data)])
    with pytest.raises(EngineError, match="bytes for 16 tokens"):
        engine.import_blocks([KVBlock(0, first.block_hash, first.tokens, first.data[:-4])])
    with pytest.raises(EngineError, match="only the last block may be partial"):
        partial = blocks[3]
        engine.import_blocks([KVBlock(0, partial.block_hash, partial.tokens, partial.data), first])


def test_kv_of_another_engine_config_is_refused() -> None:
    kv = TinyTransformer(TinyConfig(seed=3)).prefill(PROMPT).kv

    with pytest.raises(EngineError, match="config"):
        TinyTransformer(CONFIG).extend(kv, [1])
