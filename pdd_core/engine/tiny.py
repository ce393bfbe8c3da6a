"""TinyTransformer: a real (small) decoder-only transformer in numpy, with a block KV cache.

It exists to prove the PDD mechanism is exact, not approximately right: the tokens a client
gets through P-MD, through P-RLD-MD with a token-ID handoff after any number of tokens (one-shot
or chunked), and through one process are the same greedy tokens, and MD's recomputed KV equals
the KV RLD computed (DOMAIN.md section 4). For that it needs what real engines have: RMSNorm,
rotary position embeddings at absolute positions (so an extend at position ``c`` must agree with
a decode at ``c``), grouped-query attention over a block-structured cache, a SwiGLU MLP, and
deterministic seeded weights so two processes built from one config are the same model.

Arithmetic is float64; the KV cache is stored as float32, as a real cache is stored narrower than
the compute. So KV that travels as bytes is bit-identical to KV computed in place, while KV
recomputed by ``extend`` agrees to float32 rounding (the tolerance the tests use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pdd_core.engine.protocol import (
    DecodeState,
    EngineError,
    ExtendResult,
    KVBlock,
    PrefillResult,
    SequenceKV,
    StepResult,
    block_hashes,
    check_cached_prefix,
    check_chain,
    generate,
)
from pdd_core.engine.tokenizer import VOCAB_SIZE

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]
KV_DTYPE = np.float32


@dataclass(frozen=True, slots=True)
class TinyConfig:
    """Shapes and seed of a TinyTransformer; the defaults match the catalog's ``tiny-test``.

    (2 layers, hidden 64, 4 query heads and 2 KV heads of 16: grouped-query attention.)
    """

    vocab_size: int = VOCAB_SIZE
    dim: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    mlp_hidden: int = 128
    block_size: int = 16
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    seed: int = 0

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ValueError("heads: must be a multiple of kv_heads (grouped-query attention)")
        if self.head_dim % 2:
            raise ValueError("head_dim: rotary embeddings need an even head dimension")
        if min(self.vocab_size, self.dim, self.layers, self.mlp_hidden, self.block_size) < 1:
            raise ValueError("sizes: must all be positive")

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of stored KV per token: ``2 x layers x kv_heads x head_dim x 4`` (float32)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * np.dtype(KV_DTYPE).itemsize


class TinyKV(SequenceKV):
    """KV of one sequence: a list of float32 blocks ``(layers, 2, kv_heads, block, head_dim)``.

    Full blocks are made read-only and may be shared between sequences (a cached prefix and the
    requests that reuse it); a write into a read-only block copies it first, so forking a
    sequence is cheap and never lets one sequence see another's later tokens.
    """

    def __init__(self, config: TinyConfig, tokens: Sequence[int] = (), blocks: Sequence[F32] = ()):
        super().__init__(tokens, config.block_size)
        self.config = config
        self.blocks: list[F32] = list(blocks)

    def fork(self, length: int | None = None) -> TinyKV:
        """A new sequence sharing this one's first ``length`` tokens of KV (default: all)."""
        length = len(self.tokens) if length is None else length
        count = -(-length // self.block_size)
        shared = self.blocks[:count]
        for block in shared:
            block.flags.writeable = False  # both sides copy before their next write
        return TinyKV(self.config, self.tokens[:length], shared)

    def layer(self, layer: int, length: int) -> tuple[F32, F32]:
        """Keys and values of the first ``length`` positions of ``layer``: ``(kv_heads, T, hd)``."""
        joined = np.concatenate([b[layer] for b in self.blocks], axis=2)
        return joined[0, :, :length], joined[1, :, :length]

    def write(self, layer: int, start: int, keys: F64, values: F64) -> None:
        """Store ``(n, kv_heads, hd)`` keys and values at positions ``start .. start + n``."""
        c, size = self.config, self.block_size
        end = start + keys.shape[0]
        while len(self.blocks) * size < end:
            self.blocks.append(np.zeros((c.layers, 2, c.kv_heads, size, c.head_dim), KV_DTYPE))
        position = start
        while position < end:
            index, offset = divmod(position, size)
            take = min(size - offset, end - position)
            block = self.blocks[index]
            if not block.flags.writeable:
                block = self.blocks[index] = block.copy()
            rows = slice(position - start, position - start + take)
            block[layer, 0, :, offset : offset + take] = keys[rows].transpose(1, 0, 2)
            block[layer, 1, :, offset : offset + take] = values[rows].transpose(1, 0, 2)
            position += take

    def seal_full_blocks(self) -> None:
        for block in self.blocks[: len(self.tokens) // self.block_size]:
            block.flags.writeable = False

    def token_kv(self) -> F32:
        """All positions' KV as one array ``(layers, 2, kv_heads, T, hd)`` (tests compare it)."""
        joined = np.concatenate(self.blocks, axis=3)
        return joined[:, :, :, : len(self.tokens)]


class TinyTransformer:
    """The numpy engine (see the module docstring); implements ``engine.protocol.Engine``."""

    def __init__(self, config: TinyConfig | None = None) -> None:
        self.config = c = config or TinyConfig()
        self.block_size = c.block_size
        self.vocab_size = c.vocab_size
        rng = np.random.default_rng(c.seed)

        def dense(fan_in: int, fan_out: int) -> F64:
            return rng.normal(0.0, fan_in**-0.5, (c.layers, fan_in, fan_out))

        q_dim, kv_dim = c.heads * c.head_dim, c.kv_heads * c.head_dim
        self.embedding: F64 = rng.normal(0.0, 1.0, (c.vocab_size, c.dim))
        self.wq, self.wk, self.wv = dense(c.dim, q_dim), dense(c.dim, kv_dim), dense(c.dim, kv_dim)
        self.wo = dense(q_dim, c.dim)
        self.w_gate, self.w_up = dense(c.dim, c.mlp_hidden), dense(c.dim, c.mlp_hidden)
        self.w_down = dense(c.mlp_hidden, c.dim)
        # Norm gains near 1, not exactly 1, so a bug that skips one shows in the outputs.
        self.attn_norm = 1.0 + rng.normal(0.0, 0.1, (c.layers, c.dim))
        self.mlp_norm = 1.0 + rng.normal(0.0, 0.1, (c.layers, c.dim))
        self.final_norm = 1.0 + rng.normal(0.0, 0.1, c.dim)
        self.lm_head: F64 = rng.normal(0.0, c.dim**-0.5, (c.dim, c.vocab_size))
        half = c.head_dim // 2
        self._inv_freq: F64 = c.rope_theta ** (-np.arange(half, dtype=np.float64) / half)

    def new_kv(self) -> TinyKV:
        return TinyKV(self.config)

    # --- the Engine protocol -------------------------------------------------------------

    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult:
        reuse = check_cached_prefix(tokens, cached)
        kv = self._own(cached).fork(reuse) if cached is not None else self.new_kv()
        logits = self._forward([(kv, list(tokens[reuse:]))])
        return PrefillResult(kv=kv, first_token=int(np.argmax(logits[0])))

    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        if not batch:
            return StepResult(tokens=[])
        logits = self._forward([(self._own(s.kv), [s.last_token]) for s in batch])
        tokens = [int(t) for t in np.argmax(logits, axis=1)]
        for state, token in zip(batch, tokens, strict=True):
            state.last_token = token
        return StepResult(tokens=tokens)

    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        if not tokens:
            raise EngineError("tokens: extend needs at least one token")
        kv = self._own(context).fork()
        logits = self._forward([(kv, list(tokens))])
        return ExtendResult(kv=kv, next_token=int(np.argmax(logits[0])))

    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]:
        own = self._own(kv)
        hashes = own.block_hashes(partial=True)
        size = self.block_size
        out: list[KVBlock] = []
        for index in range(start_block, own.num_blocks):
            tokens = own.tokens[index * size : (index + 1) * size]
            data = np.ascontiguousarray(own.blocks[index][:, :, :, : len(tokens)]).tobytes()
            out.append(KVBlock(index, hashes[index], tuple(tokens), data))
        return out

    def import_blocks(self, blocks: Sequence[KVBlock]) -> TinyKV:
        c = self.config
        tokens = check_chain(blocks, self.block_size)
        arrays: list[F32] = []
        for block in blocks:
            n = len(block.tokens)
            if len(block.data) != n * c.kv_bytes_per_token:
                raise EngineError(f"block {block.index}: {len(block.data)} bytes for {n} tokens")
            shape = (c.layers, 2, c.kv_heads, n, c.head_dim)
            array = np.frombuffer(block.data, dtype=KV_DTYPE).reshape(shape)
            if n < self.block_size:  # the partial tail: pad into a block we can append to
                padded = np.zeros((*shape[:3], self.block_size, c.head_dim), KV_DTYPE)
                padded[:, :, :, :n] = array
                array = padded
            arrays.append(array)
        return TinyKV(c, tokens, arrays)

    # --- conveniences ------------------------------------------------------------------------

    def generate(self, tokens: Sequence[int], count: int) -> list[int]:
        """``count`` greedy tokens after ``tokens`` in one process: the reference output."""
        return generate(self, tokens, count)

    # --- the model -----------------------------------------------------------------------------

    def _own(self, kv: SequenceKV) -> TinyKV:
        if not isinstance(kv, TinyKV) or kv.config != self.config:
            raise EngineError("kv: was not produced by a TinyTransformer of this config")
        return kv

    def _forward(self, items: list[tuple[TinyKV, list[int]]]) -> F64:
        """Run new tokens of several sequences through the model; logits of each one's last.

        Matrix products run over all new tokens at once (the batch); attention runs per
        sequence over its own cache, causally, at absolute positions.
        """
        c = self.config
        starts = [len(kv.tokens) for kv, _ in items]
        counts = [len(new) for _, new in items]
        ids = np.array([t for _, new in items for t in new], dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= c.vocab_size):
            raise EngineError(f"tokens: ids must be in [0, {c.vocab_size})")
        positions = np.concatenate(
            [np.arange(s, s + n, dtype=np.float64) for s, n in zip(starts, counts, strict=True)]
        )
        angles = positions[:, None] * self._inv_freq[None, :]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        hidden = self.embedding[ids]
        total = len(ids)
        for layer in range(c.layers):
            normed = self._rms(hidden) * self.attn_norm[layer]
            q = _rope((normed @ self.wq[layer]).reshape(total, c.heads, c.head_dim), cos, sin)
            k = _rope((normed @ self.wk[layer]).reshape(total, c.kv_heads, c.head_dim), cos, sin)
            v = (normed @ self.wv[layer]).reshape(total, c.kv_heads, c.head_dim)
            attended = np.empty((total, c.heads * c.head_dim))
            offset = 0
            for (kv, _), start, n in zip(items, starts, counts, strict=True):
                rows = slice(offset, offset + n)
                kv.write(layer, start, k[rows], v[rows])
                attended[rows] = self._attend(kv, layer, start, q[rows])
                offset += n
            hidden = hidden + attended @ self.wo[layer]
            normed = self._rms(hidden) * self.mlp_norm[layer]
            gate = normed @ self.w_gate[layer]
            hidden = (
                hidden
                + (gate / (1.0 + np.exp(-gate)) * (normed @ self.w_up[layer]))
                @ (self.w_down[layer])
            )
        for (kv, new), _ in zip(items, starts, strict=True):
            kv.tokens.extend(new)
            kv.seal_full_blocks()
        last = np.cumsum(counts) - 1
        logits: F64 = (self._rms(hidden[last]) * self.final_norm) @ self.lm_head
        return logits

    def _attend(self, kv: TinyKV, layer: int, start: int, q: F64) -> F64:
        """Causal grouped-query attention of ``n`` queries at ``start..`` over the cache."""
        c = self.config
        n = q.shape[0]
        keys, values = kv.layer(layer, start + n)
        grouped = q.reshape(n, c.kv_heads, c.heads // c.kv_heads, c.head_dim)
        scores = np.einsum("nkgd,ksd->kgns", grouped, keys.astype(np.float64))
        scores /= np.sqrt(c.head_dim)
        future = np.arange(start + n)[None, :] > (start + np.arange(n))[:, None]
        scores[..., future] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        out = np.einsum("kgns,ksd->nkgd", weights, values.astype(np.float64))
        result: F64 = out.reshape(n, c.heads * c.head_dim)
        return result

    def _rms(self, x: F64) -> F64:
        scaled: F64 = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.config.norm_eps)
        return scaled


def _rope(x: F64, cos: F64, sin: F64) -> F64:
    """Rotary embedding (half-split convention) at the positions ``cos``/``sin`` encode."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    rotated: F64 = np.concatenate([first * cos - second * sin, first * sin + second * cos], -1)
    return rotated


__all__ = ["TinyConfig", "TinyKV", "TinyTransformer", "block_hashes"]
