"""Tokenizers of the data plane: a real BPE for prompt lengths, a byte-level one for the tiny model.

Prompt lengths decide everything the data plane does (prefill time, KV bytes, routing), so
they must be counted as a real model counts them: ``BpeTokenizer`` is a byte-level BPE (the
GPT-2 / cl100k family: every byte is a base token, so any text encodes) run by the maintained
``tokenizers`` package from a vocabulary trained once on this repository's own text and
shipped with it (``data/pdd-bpe.json``, 4,096 tokens; ``fixtures/tokenizer/train_bpe.py``
rebuilds it). Nothing is downloaded. Like cl100k it adds no BOS, so a trace block of 512
tokens becomes text of exactly 512 tokens (``words`` are the single-token words that make
such text). The timed engine and the gateway of a timed plane use it.

``ByteTokenizer`` (UTF-8 bytes as ids 0-255, then BOS and EOS) is the vocabulary of the tiny
numpy model, whose greedy tokens the tests compare exactly; it needs no data file.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

BYTE_VALUES = 256
BOS = 256
EOS = 257
VOCAB_SIZE = 258
BPE_PATH = Path(__file__).resolve().parent / "data" / "pdd-bpe.json"
_WORD = re.compile("\u0120[a-z]{2,}")  # GPT-2 byte-level spelling of " word"


class StreamDecoder(Protocol):
    """Turns token ids into text piece by piece (a token may end mid-character)."""

    def step(self, ids: Sequence[int]) -> str: ...

    def flush(self) -> str: ...


class TextTokenizer(Protocol):
    """What the gateway needs of a tokenizer: encode a prompt, decode a stream."""

    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def stream_decoder(self) -> StreamDecoder: ...


class _ByteStream:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def step(self, ids: Sequence[int]) -> str:
        return str(self._decoder.decode(bytes(i for i in ids if 0 <= i < BYTE_VALUES)))

    def flush(self) -> str:
        return str(self._decoder.decode(b"", final=True))


class ByteTokenizer:
    """UTF-8 bytes as token ids 0-255; ``BOS`` and ``EOS`` above them."""

    vocab_size = VOCAB_SIZE
    bos = BOS
    eos = EOS

    def encode(self, text: str, *, bos: bool = True) -> list[int]:
        """Token ids of ``text``, prefixed by ``BOS`` unless ``bos`` is false."""
        ids = list(text.encode("utf-8"))
        return [BOS, *ids] if bos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; special ids are dropped and invalid UTF-8 becomes U+FFFD.

        A greedy model may stop in the middle of a multi-byte character, and a stream must
        still be printable, so decoding never raises.
        """
        data = bytes(i for i in ids if 0 <= i < BYTE_VALUES)
        return data.decode("utf-8", errors="replace")

    def stream_decoder(self) -> StreamDecoder:
        return _ByteStream()


class _BpeStream:
    def __init__(self, tokenizer: BpeTokenizer) -> None:
        from tokenizers.decoders import DecodeStream

        self._tokenizer = tokenizer
        self._stream = DecodeStream(skip_special_tokens=True)

    def step(self, ids: Sequence[int]) -> str:
        pieces = []
        for token in ids:
            piece = self._stream.step(self._tokenizer.backend, token)
            if piece:
                pieces.append(piece)
        return "".join(pieces)

    def flush(self) -> str:
        return ""


class BpeTokenizer:
    """The shipped byte-level BPE (see the module docstring); ids 0 and 1 are BOS and EOS."""

    bos = 0
    eos = 1

    def __init__(self, path: Path | str = BPE_PATH) -> None:
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_file(str(path))
        self.vocab_size = int(self.backend.get_vocab_size())

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS, as cl100k: a prompt's length is its text's)."""
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Iterable[int]) -> str:
        return str(self.backend.decode(list(ids), skip_special_tokens=True))

    def stream_decoder(self) -> StreamDecoder:
        return _BpeStream(self)

    @functools.cached_property
    def words(self) -> tuple[int, ...]:
        """Ids of the single-token lower-case words (`` word``), in id order.

        Text made of these (each with its leading space) has exactly one token per word, so
        synthetic prompts hit a target length exactly and pseudo output reads as words.
        """
        vocab = self.backend.get_vocab()
        found = sorted(i for s, i in vocab.items() if _WORD.fullmatch(s))
        return tuple(i for i in found if self.encode(self.decode([i])) == [i])

    def word_text(self, ids: Iterable[int]) -> str:
        """The text of word ids (each word with its leading space)."""
        return self.decode(ids)


@functools.cache
def bpe() -> BpeTokenizer:
    """The shipped BPE, loaded once per process."""
    return BpeTokenizer()


def tokenizer_for(engine_kind: str) -> TextTokenizer:
    """The tokenizer of an engine kind: bytes for the tiny model, the BPE otherwise.

    A llama.cpp plane's gateway uses its GGUF file's own vocabulary instead
    (``pdd_core.engine.llamacpp_vocab.gguf_tokenizer``); ``"llamacpp"`` here means the byte one.
    """
    return ByteTokenizer() if engine_kind in ("tiny", "llamacpp") else bpe()
