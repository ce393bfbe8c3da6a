"""LlamaCppEngine: the exported TinyTransformer on llama.cpp, and its KV moving as blocks.

Every test runs the real library on a GGUF file written from the seeded numpy model. Two engines
in one test are two llama.cpp contexts that share nothing but the bytes passed between them, as
P and MD share nothing but the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.llamacpp_support import require_llama_cpp, tiny_gguf

require_llama_cpp()

from pdd_core.engine.llamacpp import LlamaCppEngine, open_engine  # noqa: E402
from pdd_core.engine.llamacpp_config import LlamaCppSettings  # noqa: E402
from pdd_core.engine.protocol import (  # noqa: E402
    DecodeState,
    EngineError,
    KVBlock,
    continue_greedy,
)
from pdd_core.engine.tiny import TinyConfig, TinyTransformer  # noqa: E402
from pdd_core.engine.tokenizer import ByteTokenizer  # noqa: E402

PROMPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "PDD moves KV across datacenters; the relay decodes meanwhile.",
    "a",
    "Longer context " * 30,
]


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gguf(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def settings(gguf: Path) -> LlamaCppSettings:
    return LlamaCppSettings(gguf=str(gguf), max_sequences=16, n_ctx=8192)


@pytest.fixture(scope="module")
def engine(settings: LlamaCppSettings) -> Iterator[LlamaCppEngine]:
    with open_engine(settings) as opened:
        yield opened


@pytest.fixture(scope="module")
def receiver(settings: LlamaCppSettings) -> Iterator[LlamaCppEngine]:
    with open_engine(settings) as opened:
        yield opened


def encode(text: str) -> list[int]:
    return ByteTokenizer().encode(text)


def f16_noise(arrays: tuple[np.ndarray, ...], seed: int) -> tuple[np.ndarray, ...]:
    """Finite random f16 values in the byte shape of each array (KV corrupted plausibly)."""
    rng = np.random.default_rng(seed)
    return tuple(
        rng.normal(0.0, 1.0, a.size // 2).astype(np.float16).view(np.uint8).reshape(a.shape)
        for a in arrays
    )


def without_sequence_ids(data: bytes, cells: int) -> bytes:
    """The state with the sender's sequence ids zeroed (the receiver ignores them and the
    engine writes 0): after the magic, and in each cell's metadata."""
    out = bytearray(data)
    out[4:8] = bytes(4)
    for cell in range(cells):
        start = 16 + 12 * cell + 8
        out[start : start + 4] = bytes(4)
    return bytes(out)


@pytest.mark.parametrize(
    ("kv_type", "flash_attention"), [("f16", False), ("f32", False), ("f16", True)]
)
def test_llama_cpp_and_the_numpy_engine_agree_token_for_token(
    settings: LlamaCppSettings, kv_type: str, flash_attention: bool
) -> None:
    numpy_model = TinyTransformer(TinyConfig())
    variant = replace(settings, kv_type=kv_type, flash_attention=flash_attention)
    with open_engine(variant) as llama:
        for prompt in PROMPTS:
            tokens = encode(prompt)
            assert llama.generate(tokens, 40) == numpy_model.generate(tokens, 40)


def test_the_gguf_file_carries_the_byte_vocabulary(gguf: Path, engine: LlamaCppEngine) -> None:
    import gguf as gguf_package

    reader = gguf_package.GGUFReader(gguf)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    texts = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    bos = reader.fields["tokenizer.ggml.bos_token_id"]

    assert engine.vocab_size == 258
    assert engine.byte_vocabulary is True
    assert texts[:2] == ["<0x00>", "<0x01>"]
    assert texts[65] == "<0x41>"
    assert texts[256:] == ["<s>", "</s>"]
    assert int(bos.parts[bos.data[0]][0]) == 256


def test_blocks_shipped_to_another_context_continue_the_same_greedy_tokens(
    engine: LlamaCppEngine, receiver: LlamaCppEngine
) -> None:
    tokens = encode("Blocks cross the WAN, the decode side imports and continues.")
    reference = engine.generate(tokens, 24)
    prefill = engine.prefill(tokens)
    blocks = engine.export_blocks(prefill.kv)

    imported = receiver.import_blocks(blocks)
    assert imported.tokens == tokens
    continued = continue_greedy(receiver, DecodeState("r", imported, prefill.first_token), 24)

    assert [len(b.tokens) for b in blocks] == [16, 16, 16, 13]
    assert continued == reference


def test_a_corrupted_block_changes_the_continuation(
    engine: LlamaCppEngine, receiver: LlamaCppEngine
) -> None:
    from pdd_core.engine import llamacpp_state

    tokens = encode("Corrupt one block of KV and the receiver must decode something else.")
    reference = engine.generate(tokens, 16)
    prefill = engine.prefill(tokens)
    blocks = engine.export_blocks(prefill.kv)
    state = llamacpp_state.parse(blocks[3].data)
    broken_data = llamacpp_state.serialize(replace(state, keys=f16_noise(state.keys, 7)))
    broken = KVBlock(blocks[3].index, blocks[3].block_hash, blocks[3].tokens, broken_data)

    kv = receiver.import_blocks([*blocks[:3], broken])
    continued = continue_greedy(receiver, DecodeState("r", kv, prefill.first_token), 16)

    assert len(broken_data) == len(blocks[3].data)
    assert continued != reference


def test_the_state_bytes_parse_to_the_layout_of_this_llama_cpp_version(
    engine: LlamaCppEngine,
) -> None:
    """The byte format is internal to llama.cpp: this pins it (update with the version pin)."""
    import llama_cpp

    from pdd_core.engine import llamacpp_state

    kv = engine.prefill(list(range(40))).kv
    data = engine.sequence_state(kv)
    state = llamacpp_state.parse(data)
    cells, k_row, v_elements = 40, 2 * 16 * 2, 2 * 16  # kv_heads x head_dim, f16

    assert llama_cpp.__version__ == "0.3.36"
    assert state.positions.tolist() == list(range(40))
    assert state.v_trans is True  # flash attention off: V stored transposed
    assert [(f.type_id, f.row_bytes) for f in state.k_formats] == [(1, k_row)] * 2
    assert [(f.element_bytes, f.elements) for f in state.v_formats] == [(2, v_elements)] * 2
    assert len(data) == 16 + cells * 12 + 8 + 2 * (12 + cells * k_row) + 2 * (12 + cells * 64)
    assert data[:4] == (0xAF143CD8).to_bytes(4, "little")
    assert llamacpp_state.serialize(state) == without_sequence_ids(data, cells)
    assert engine.kv_bytes_per_token == 12 + 4 * k_row


def test_split_then_join_gives_back_the_sequence_bytes(engine: LlamaCppEngine) -> None:
    from pdd_core.engine import llamacpp_state

    kv = engine.prefill(list(range(1, 38))).kv
    data = engine.sequence_state(kv)
    pieces = llamacpp_state.split(data, 16)

    assert [llamacpp_state.parse(p).cells for p in pieces] == [16, 16, 5]
    assert llamacpp_state.serialize(llamacpp_state.join(pieces)) == without_sequence_ids(data, 37)
    assert llamacpp_state.split(data, 16, start_block=2) == pieces[2:]


def test_a_batched_step_equals_decoding_each_sequence_alone(engine: LlamaCppEngine) -> None:
    prompts = [encode(p) for p in PROMPTS[:3]]
    alone = [engine.generate(p, 10) for p in prompts]
    states = []
    for i, prompt in enumerate(prompts):
        result = engine.prefill(prompt)
        states.append(DecodeState(str(i), result.kv, result.first_token))
    batched = [[s.last_token] for s in states]
    for _ in range(9):
        for row, token in zip(batched, engine.decode_step(states).tokens, strict=True):
            row.append(token)

    assert batched == alone


def test_extend_over_handed_tokens_predicts_the_next_decoded_token(
    engine: LlamaCppEngine, receiver: LlamaCppEngine
) -> None:
    tokens = encode("The relay hands over these token IDs; main decode extends over them.")
    reference = engine.generate(tokens, 12)
    prefill = engine.prefill(tokens)
    context = receiver.import_blocks(engine.export_blocks(prefill.kv))

    result = receiver.extend(context, reference[:7])

    assert result.next_token == reference[7]
    assert len(result.kv) == len(tokens) + 7
    assert len(context) == len(tokens)  # the context itself is unchanged


def test_a_prefill_over_a_cached_prefix_equals_a_full_prefill(
    engine: LlamaCppEngine, receiver: LlamaCppEngine
) -> None:
    turn1 = encode("user: plan a trip with three stops. ")
    turn2 = turn1 + encode("assistant: sure. user: add a lake.")[1:]
    cached = receiver.import_blocks(engine.export_blocks(engine.prefill(turn1).kv)[:2])

    result = receiver.prefill(turn2, cached)
    assert result.kv.tokens == turn2
    continued = continue_greedy(receiver, DecodeState("r", result.kv, result.first_token), 12)

    assert len(cached) == 32
    assert continued == engine.generate(turn2, 12)


def test_blocks_of_another_kv_type_are_refused_with_the_setting_named(
    engine: LlamaCppEngine, settings: LlamaCppSettings
) -> None:
    blocks = engine.export_blocks(engine.prefill(encode("kv types must match")).kv)
    with (
        open_engine(replace(settings, kv_type="f32")) as other,
        pytest.raises(EngineError, match="kv_type and flash_attention must be equal"),
    ):
        other.import_blocks(blocks)


def test_a_truncated_block_is_refused(engine: LlamaCppEngine) -> None:
    blocks = engine.export_blocks(engine.prefill(encode("truncate me please")).kv)
    cut = KVBlock(blocks[0].index, blocks[0].block_hash, blocks[0].tokens, blocks[0].data[:-5])

    with pytest.raises(EngineError, match=r"not llama\.cpp KV of this version"):
        engine.import_blocks([cut, *blocks[1:]])


def test_dropped_sequences_give_their_ids_back(settings: LlamaCppSettings) -> None:
    with open_engine(replace(settings, max_sequences=3)) as small:
        for _ in range(10):
            small.prefill(encode("short-lived"))
        held = [small.prefill(encode(f"held {i}")).kv for i in range(3)]

        assert small.free_sequences == 0
        with pytest.raises(EngineError, match="all 3 sequences hold KV"):
            small.prefill(encode("one too many"))
        del held
        assert small.free_sequences == 3


def test_the_routers_kv_size_estimate_equals_the_exported_bytes(
    engine: LlamaCppEngine, settings: LlamaCppSettings, tmp_path: Path
) -> None:
    from pdd_core.engine.llamacpp_config import kv_bytes_per_token

    not_written = replace(settings, gguf=str(tmp_path / "later.gguf"), gguf_source="tiny")

    assert kv_bytes_per_token(settings) == engine.kv_bytes_per_token == 268
    assert kv_bytes_per_token(not_written) == 268
    assert kv_bytes_per_token(replace(settings, kv_type="f32")) == 12 + 512


def test_kv_with_a_nan_is_refused_before_it_reaches_the_cache(engine: LlamaCppEngine) -> None:
    """A NaN left in a freed cell would poison every later request of the process."""
    from pdd_core.engine import llamacpp_state

    blocks = engine.export_blocks(engine.prefill(encode("not a number")).kv)
    state = llamacpp_state.parse(blocks[0].data)
    values = state.values[0].copy()
    values.reshape(-1)[:2] = np.frombuffer(np.float16("nan").tobytes(), np.uint8)
    poisoned = llamacpp_state.serialize(replace(state, values=(values, *state.values[1:])))
    block = KVBlock(blocks[0].index, blocks[0].block_hash, blocks[0].tokens, poisoned)

    with pytest.raises(EngineError, match="NaN or infinite values"):
        engine.import_blocks([block])


def test_calls_from_several_threads_give_the_one_thread_tokens(engine: LlamaCppEngine) -> None:
    from concurrent.futures import ThreadPoolExecutor

    prompts = [encode(f"Thread {i} asks the same context for greedy tokens.") for i in range(6)]
    alone = [engine.generate(p, 12) for p in prompts]

    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(lambda p: engine.generate(p, 12), prompts))

    assert together == alone
    assert engine.free_sequences == engine.settings.max_sequences
