"""The ``engine.llamacpp`` section of a topology: which GGUF file and how llama.cpp runs it.

Pure Python (no ``llama_cpp`` import), so a topology is validated at load time on any host. Every
role reads the same section, because KV moves between roles as llama.cpp's own bytes: the KV
type and the flash-attention setting (which decides whether V is stored transposed) must be
equal on the sender and the receiver. They are therefore not per-role settings, and an engine
also refuses, at import, blocks whose layout differs from its own (``LlamaCppEngine``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

# ggml type ids (ggml.h ``enum ggml_type``) of the KV types the engine accepts.
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 8, "bf16": 30}
GGUF_SOURCES = ("", "tiny", "tiny-bpe")
MAX_SEQUENCES = 256  # llama.cpp's LLAMA_MAX_SEQ


@dataclass(frozen=True, slots=True)
class LlamaCppSettings:
    """Context settings of every llama.cpp engine of a plane.

    ``gguf`` is the model file (relative paths resolve against the working directory of
    ``pdd up``); with ``gguf_source: "tiny"`` a missing file is first written from the project's
    seeded ``TinyTransformer`` (tests and the demo), otherwise a missing file is an error.
    ``n_ctx`` is the KV cells shared by all sequences (one unified cache); ``max_sequences`` is
    how many sequences (requests, cached prefixes being extended) may hold KV at once.
    """

    gguf: str = ""
    gguf_source: str = ""
    threads: int = 1
    n_ctx: int = 32_768
    n_batch: int = 512
    max_sequences: int = 64
    kv_type: str = "f16"
    flash_attention: bool = False

    def __post_init__(self) -> None:
        if not self.gguf:
            raise ValueError("gguf: the path of a GGUF model file is required")
        if self.gguf_source not in GGUF_SOURCES:
            raise ValueError("gguf_source: must be empty, 'tiny' or 'tiny-bpe'")
        if not self.gguf_source and not Path(self.gguf).is_file():
            raise ValueError(f"gguf: no file at {self.gguf!r}")
        if self.kv_type not in KV_TYPES:
            raise ValueError(f"kv_type: must be one of {', '.join(KV_TYPES)}")
        if not isinstance(self.flash_attention, bool):
            raise ValueError("flash_attention: must be true or false")
        if not 1 <= self.max_sequences <= MAX_SEQUENCES:
            raise ValueError(f"max_sequences: must be in [1, {MAX_SEQUENCES}]")
        for name in ("threads", "n_ctx", "n_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer")

    @property
    def kv_type_id(self) -> int:
        return KV_TYPES[self.kv_type]


def settings_from_mapping(raw: Mapping[str, Any]) -> LlamaCppSettings:
    """Parse the section; ``ValueError`` names the bad or unknown field."""
    known = {f.name for f in fields(LlamaCppSettings)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")
    return LlamaCppSettings(**dict(raw))


# Bytes per KV element of each type (q8_0: blocks of 32 int8 values plus one f16 scale).
KV_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32}
CELL_BYTES = 12  # llama.cpp's per-token cell bookkeeping in exported state (pos, count, seq)


def kv_bytes_per_token(settings: LlamaCppSettings) -> float:
    """Bytes one token's KV takes on the wire: ``2 x layers x kv_heads x head_dim x`` the KV
    type's bytes, plus the cell bookkeeping. Shapes come from the GGUF header (the ``gguf``
    package reads it without loading weights), or from the TinyTransformer's config when
    ``gguf_source`` is ``tiny`` and the file is not written yet.
    """
    element = KV_TYPE_BYTES[settings.kv_type]
    path = Path(settings.gguf)
    if not path.is_file():
        from pdd_core.engine.tiny import TinyConfig

        c = TinyConfig()
        return 2 * c.layers * c.kv_heads * c.head_dim * element + CELL_BYTES
    import gguf

    fields = gguf.GGUFReader(path).fields

    def value(key: str) -> int:
        contents = fields[key].contents()
        return int(contents[0] if isinstance(contents, list) else contents)

    arch = str(fields["general.architecture"].contents())
    layers = value(f"{arch}.block_count")
    kv_heads = value(f"{arch}.attention.head_count_kv")
    if f"{arch}.attention.key_length" in fields:
        k_dim = value(f"{arch}.attention.key_length")
        v_dim = value(f"{arch}.attention.value_length")
    else:
        k_dim = v_dim = value(f"{arch}.embedding_length") // value(f"{arch}.attention.head_count")
    return layers * kv_heads * (k_dim + v_dim) * element + CELL_BYTES
