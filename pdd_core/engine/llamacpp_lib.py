"""What the llama.cpp engine and the GGUF tokenizer both stand on: the library, loaded once per
process, a vocabulary's kind, and the seeded GGUF file written where a topology asks for it.

``llama_cpp`` is imported on first use (``library``): the rest of ``pdd_core`` works without the
package. ``LlamaCppEngine`` (``llamacpp``) runs a model through it; ``GgufTokenizer``
(``llamacpp_vocab``) reads a file's vocabulary alone.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any

from pdd_core.engine.llamacpp_config import LlamaCppSettings
from pdd_core.engine.tokenizer import BOS, BYTE_VALUES, EOS, VOCAB_SIZE

log = logging.getLogger(__name__)
_LOG_ERROR = 4  # GGML_LOG_LEVEL_ERROR
_init_lock = threading.Lock()
_initialised: list[Any] = []  # the log callback, kept alive while the library may call it


def library() -> Any:
    """The ``llama_cpp`` module, initialised once per process with its logs routed to ours."""
    import llama_cpp

    with _init_lock:
        if not _initialised:

            def forward(level: int, text: bytes | None, _user: Any) -> None:
                if level == _LOG_ERROR and text:
                    log.warning("llama.cpp: %s", text.decode("utf-8", "replace").rstrip())

            callback = llama_cpp.llama_log_callback(forward)
            llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _initialised.append(callback)
    return llama_cpp


def is_byte_vocabulary(lib: Any, vocab: Any) -> bool:
    """Whether a llama.cpp vocabulary's ids mean ``ByteTokenizer``'s: bytes 0-255, BOS, EOS."""
    if int(lib.llama_vocab_n_tokens(vocab)) != VOCAB_SIZE:
        return False
    text = lib.llama_vocab_get_text
    return bool(
        all(text(vocab, i) == f"<0x{i:02X}>".encode() for i in range(BYTE_VALUES))
        and int(lib.llama_vocab_bos(vocab)) == BOS
        and int(lib.llama_vocab_eos(vocab)) == EOS
    )


def ensure_source(settings: LlamaCppSettings) -> None:
    """Write the GGUF file from the seeded ``TinyTransformer`` if ``gguf_source`` says so and it
    is missing: ``"tiny"`` with the byte vocabulary, ``"tiny-bpe"`` with the shipped BPE."""
    if settings.gguf_source:
        from pdd_core.engine.gguf_export import ensure_tiny

        vocab = "bpe" if settings.gguf_source == "tiny-bpe" else "byte"
        ensure_tiny(settings.gguf, vocab=vocab)
