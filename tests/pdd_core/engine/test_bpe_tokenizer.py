"""The shipped BPE: offline, round trips, exact lengths for synthetic text, streamed decoding."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.engine.tokenizer import ByteTokenizer, bpe, tokenizer_for


def test_the_vocabulary_ships_with_the_package_and_has_no_bos() -> None:
    tokenizer = bpe()

    assert tokenizer.vocab_size == 4096
    ids = tokenizer.encode("the prefill agent ships KV blocks")
    assert len(ids) < len("the prefill agent ships KV blocks") // 2
    assert tokenizer.bos not in ids


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=200))
def test_any_text_round_trips(text: str) -> None:
    tokenizer = bpe()

    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_a_text_of_n_words_is_exactly_n_tokens() -> None:
    tokenizer = bpe()
    words = tokenizer.words[:300]

    text = tokenizer.word_text(words)

    assert tokenizer.encode(text) == list(words)
    assert len(words) == 300


def test_streamed_decoding_equals_decoding_the_whole() -> None:
    tokenizer = bpe()
    ids = tokenizer.encode("naïve café: the relay decodes — 日本語 too")
    stream = tokenizer.stream_decoder()

    pieces = [stream.step([token]) for token in ids]

    assert "".join(pieces) + stream.flush() == tokenizer.decode(ids)


def test_the_tiny_model_keeps_its_byte_vocabulary() -> None:
    assert isinstance(tokenizer_for("tiny"), ByteTokenizer)
    assert tokenizer_for("timed") is bpe()
