"""The tokenizer of a GGUF file: its own vocabulary, run by llama.cpp, for the gateway.

A GGUF model carries its vocabulary (SentencePiece, byte-level BPE, ...). The gateway of a
llama.cpp plane loads that vocabulary alone (``vocab_only``: no weights are read) and encodes
prompts and decodes streams with llama.cpp's own tokenizer, so the ids the agents see are the ids
the model was trained on, and the decode agents stop on the file's EOS id.

The exported ``TinyTransformer`` with the byte vocabulary is the one exception: its ids are
``ByteTokenizer``'s (BOS first, bytes as ids), which the numpy engine shares, so for that file
(recognised from its vocabulary, not from a setting) ``ByteTokenizer`` is used.

Encoding honours the file's ``add_bos_token`` and never turns prompt text into control tokens
(a client cannot inject ``</s>``); decoding renders no control token, so EOS adds no text.
"""

from __future__ import annotations

import codecs
import ctypes
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pdd_core.engine.llamacpp_config import settings_from_mapping
from pdd_core.engine.llamacpp_lib import ensure_source, is_byte_vocabulary, library
from pdd_core.engine.protocol import EngineError
from pdd_core.engine.tokenizer import EOS, ByteTokenizer, StreamDecoder, TextTokenizer

_PIECE_BYTES = 256


class _GgufStream:
    def __init__(self, tokenizer: GgufTokenizer) -> None:
        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def step(self, ids: Sequence[int]) -> str:
        data = b"".join(self._tokenizer.piece(i) for i in ids)
        return str(self._decoder.decode(data))

    def flush(self) -> str:
        return str(self._decoder.decode(b"", final=True))


class GgufTokenizer:
    """A GGUF file's vocabulary through llama.cpp (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self._lib = lib = library()
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self._model = lib.llama_model_load_from_file(path.encode(), params)
        if not self._model:
            raise EngineError(f"gguf: llama.cpp could not load the vocabulary of {path!r}")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.vocab_size = int(lib.llama_vocab_n_tokens(self._vocab))
        self.bos = int(lib.llama_vocab_bos(self._vocab))
        self.eos = int(lib.llama_vocab_eos(self._vocab))
        self.byte_vocabulary = is_byte_vocabulary(lib, self._vocab)

    def __del__(self) -> None:
        model = getattr(self, "_model", None)
        if model:
            self._lib.llama_model_free(model)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (BOS as the file says; text never becomes a control token)."""
        data = text.encode("utf-8")
        size = len(data) + 2
        while True:
            out = (ctypes.c_int32 * size)()
            n = int(self._lib.llama_tokenize(self._vocab, data, len(data), out, size, True, False))
            if n >= 0:
                return list(out[:n])
            size = -n

    def piece(self, token: int) -> bytes:
        """The bytes of one token (empty for control tokens such as EOS)."""
        size = _PIECE_BYTES
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, False))
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; invalid UTF-8 (a stream cut mid-character) becomes U+FFFD."""
        stream = self.stream_decoder()
        return stream.step(list(ids)) + stream.flush()

    def stream_decoder(self) -> StreamDecoder:
        return _GgufStream(self)


def gguf_tokenizer(raw: Mapping[str, Any]) -> tuple[TextTokenizer, int]:
    """The tokenizer and EOS id of a topology's ``engine.llamacpp`` section.

    With ``gguf_source: "tiny"`` the file is written first if it is missing, as the agents do.
    """
    settings = settings_from_mapping(raw)
    ensure_source(settings)
    tokenizer = GgufTokenizer(settings.gguf)
    if tokenizer.byte_vocabulary:
        return ByteTokenizer(), EOS
    return tokenizer, tokenizer.eos
