"""Write the project's ``TinyTransformer`` as a GGUF file that llama.cpp runs token for token.

The repository ships no weights: tests and the demo build this file from the seeded numpy
model whenever they need it, and a user points a topology at a real GGUF instead. The file is a
``llama``-architecture F32 model with a vocabulary equal to ``ByteTokenizer``'s (256 byte tokens,
``<s>`` as BOS, ``</s>`` as EOS), so the agents' token ids mean the same thing on both engines.
With ``vocab="bpe"`` it carries the shipped 4,096-token byte-level BPE instead
(``data/pdd-bpe.json`` as llama.cpp's ``gpt2`` tokenizer: tokens, merges, ``<|bos|>`` and
``<|eos|>``), a model with its own vocabulary as a real GGUF has: the data plane then tokenizes
with the file's vocabulary.

Two layout facts make the export exact (the same ones llama.cpp's own Hugging Face converter
applies, ``convert_hf_to_gguf.py``):

- GGUF stores a linear layer as ``(out, in)`` rows; the numpy model multiplies ``x @ W`` with
  ``W`` shaped ``(in, out)``, so every matrix is transposed.
- ``TinyTransformer`` rotates the two halves of each head (the "half-split" RoPE of Hugging Face
  Llama); llama.cpp's ``llama`` architecture rotates adjacent pairs. Permuting the rows of the Q
  and K projections within each head (``_permute_rope_rows``) turns one into the other; attention
  scores are unchanged because Q and K are permuted alike.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pdd_core.engine.tiny import TinyConfig, TinyTransformer
from pdd_core.engine.tokenizer import BOS, BPE_PATH, BYTE_VALUES, EOS, VOCAB_SIZE

ARCH = "llama"
CONTEXT_LENGTH = 32_768
BPE_VOCAB_SIZE = 4096
VOCABULARIES = ("byte", "bpe")
# llama.cpp token types (gguf.TokenType): NORMAL 1, CONTROL 3, BYTE 6.
_TYPE_NORMAL = 1
_TYPE_CONTROL = 3
_TYPE_BYTE = 6


def _permute_rope_rows(weight: NDArray[np.float32], heads: int) -> NDArray[np.float32]:
    """Reorder each head's rows from half-split to interleaved RoPE order.

    Row ``j`` of the first half and row ``j`` of the second half become rows ``2j`` and
    ``2j + 1``: the pair llama.cpp rotates together.
    """
    rows, cols = weight.shape
    permuted = weight.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2)
    return np.ascontiguousarray(permuted.reshape(rows, cols))


def vocabulary() -> tuple[list[str], list[int]]:
    """Token strings and types of the byte vocabulary, in ``ByteTokenizer`` id order."""
    tokens = [f"<0x{value:02X}>" for value in range(BYTE_VALUES)]
    types = [_TYPE_BYTE] * BYTE_VALUES
    for token_id, text in sorted({BOS: "<s>", EOS: "</s>"}.items()):
        assert token_id == len(tokens), "special tokens follow the byte tokens"
        tokens.append(text)
        types.append(_TYPE_CONTROL)
    return tokens, types


def bpe_vocabulary(path: Path = BPE_PATH) -> tuple[list[str], list[int], list[str], int, int]:
    """Tokens, types, merges, BOS and EOS ids of a Hugging Face byte-level BPE file.

    Tokens keep their byte-level spelling (``\u0120word``), as llama.cpp's ``gpt2`` reads them.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    vocab: dict[str, int] = data["model"]["vocab"]
    tokens = [""] * len(vocab)
    for text, token_id in vocab.items():
        tokens[token_id] = text
    special = {t["content"]: int(t["id"]) for t in data["added_tokens"] if t["special"]}
    types = [_TYPE_CONTROL if i in special.values() else _TYPE_NORMAL for i in range(len(tokens))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, types, merges, special["<|bos|>"], special["<|eos|>"]


def _add_vocabulary(writer: Any, vocab: str) -> None:
    if vocab == "byte":
        tokens, types = vocabulary()
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores([0.0] * len(tokens))
        writer.add_token_types(types)
        writer.add_bos_token_id(BOS)
        writer.add_eos_token_id(EOS)
    else:
        tokens, types, merges, bos, eos = bpe_vocabulary()
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("gpt-2")  # ByteLevel with GPT-2's split regex, as the file's
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(bos)
        writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)


def tensors(model: TinyTransformer) -> dict[str, NDArray[np.float32]]:
    """The model's weights under llama.cpp's tensor names, in GGUF row layout (float32)."""
    c = model.config

    def f32(array: NDArray[np.float64]) -> NDArray[np.float32]:
        return np.ascontiguousarray(array, dtype=np.float32)

    out = {"token_embd.weight": f32(model.embedding)}
    for layer in range(c.layers):
        prefix = f"blk.{layer}."
        out[prefix + "attn_norm.weight"] = f32(model.attn_norm[layer])
        out[prefix + "attn_q.weight"] = _permute_rope_rows(f32(model.wq[layer].T), c.heads)
        out[prefix + "attn_k.weight"] = _permute_rope_rows(f32(model.wk[layer].T), c.kv_heads)
        out[prefix + "attn_v.weight"] = f32(model.wv[layer].T)
        out[prefix + "attn_output.weight"] = f32(model.wo[layer].T)
        out[prefix + "ffn_norm.weight"] = f32(model.mlp_norm[layer])
        out[prefix + "ffn_gate.weight"] = f32(model.w_gate[layer].T)
        out[prefix + "ffn_up.weight"] = f32(model.w_up[layer].T)
        out[prefix + "ffn_down.weight"] = f32(model.w_down[layer].T)
    out["output_norm.weight"] = f32(model.final_norm)
    out["output.weight"] = f32(model.lm_head.T)
    return out


def export_tiny(path: Path | str, config: TinyConfig | None = None, *, vocab: str = "byte") -> Path:
    """Write the ``TinyTransformer`` of ``config`` to ``path`` as GGUF; returns the path.

    ``vocab`` is ``"byte"`` (``ByteTokenizer``'s ids) or ``"bpe"`` (the shipped BPE; the default
    config then has its 4,096-token vocabulary).
    """
    if vocab not in VOCABULARIES:
        raise ValueError(f"vocab: must be one of {', '.join(VOCABULARIES)}, got {vocab!r}")
    if config is None and vocab == "bpe":
        config = TinyConfig(vocab_size=BPE_VOCAB_SIZE)
    return export_model(path, TinyTransformer(config), vocab=vocab)


def export_model(path: Path | str, model: TinyTransformer, *, vocab: str = "byte") -> Path:
    """Write ``model`` to ``path`` as GGUF with vocabulary ``vocab``; returns the path.

    The file appears atomically (written beside it, then renamed), so agent processes that
    start together and each ensure the file never read a half-written one.
    """
    import gguf

    c = model.config
    size = VOCAB_SIZE if vocab == "byte" else BPE_VOCAB_SIZE
    if c.vocab_size != size:
        raise ValueError(f"vocab {vocab!r} has {size} tokens; the model has {c.vocab_size}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    os.close(handle)
    try:
        writer = gguf.GGUFWriter(temporary, ARCH)
        writer.add_name(f"pdd-tiny-transformer-seed{c.seed}")
        writer.add_context_length(CONTEXT_LENGTH)
        writer.add_embedding_length(c.dim)
        writer.add_block_count(c.layers)
        writer.add_feed_forward_length(c.mlp_hidden)
        writer.add_head_count(c.heads)
        writer.add_head_count_kv(c.kv_heads)
        writer.add_rope_dimension_count(c.head_dim)
        writer.add_rope_freq_base(c.rope_theta)
        writer.add_layer_norm_rms_eps(c.norm_eps)
        writer.add_file_type(gguf.LlamaFileType.ALL_F32)
        _add_vocabulary(writer, vocab)
        for name, array in tensors(model).items():
            writer.add_tensor(name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def ensure_tiny(path: Path | str, config: TinyConfig | None = None, *, vocab: str = "byte") -> Path:
    """``path`` if it exists, else the exported ``TinyTransformer`` written there."""
    target = Path(path)
    return target if target.is_file() else export_tiny(target, config, vocab=vocab)
