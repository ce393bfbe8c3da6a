"""LlamaCppEngine: a real GGUF model behind the agents, through llama.cpp's low-level API.

One llama.cpp context per agent process holds every sequence's KV in one unified cache; each
``LlamaKV`` owns one sequence id in it. The operations map onto llama.cpp as follows:

- ``prefill``: a new sequence that shares the cached prefix's cells (``llama_memory_seq_cp``:
  no copy, the cells gain a sequence id), then the uncached tokens through ``llama_decode`` in
  chunks of ``n_batch``, logits only for the last token.
- ``decode_step``: one ``llama_batch`` with one token per sequence (its position is the
  sequence's KV length), one logits row per sequence, greedy argmax.
- ``extend``: a fork of the context's sequence plus the handed-over token IDs in one pass.
- ``export_blocks`` / ``import_blocks``: ``llama_state_seq_get_data`` / ``..._set_data``, the
  bytes cut into and joined from blocks by ``llamacpp_state``. An import whose blocks were
  written with another KV type or flash-attention setting is refused with a clear error.
- Finishing: when the agent drops a sequence's last reference, its id is queued and its cells
  are removed (``llama_memory_seq_rm``) at the start of the engine's next call, on the thread
  that owns the context.
- Threads: every call holds the engine's lock, so agents may run the long calls (a prefill, a
  decode step) in a worker thread while their event loop goes on; llama.cpp never sees two
  calls on one context at once.

Costs are the real compute time, so every result's ``seconds`` is 0 (``_StepFloor`` in the agent
runtime may still add a floor to pace a plane). ``llama_cpp`` is imported on first use: the rest
of ``pdd_core`` works without the package.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from pdd_core.engine import llamacpp_state as state_format
from pdd_core.engine.llamacpp_config import KV_TYPES, LlamaCppSettings, settings_from_mapping
from pdd_core.engine.llamacpp_lib import ensure_source, is_byte_vocabulary, library
from pdd_core.engine.protocol import (
    DecodeState,
    EngineError,
    ExtendResult,
    KVBlock,
    PrefillResult,
    SequenceKV,
    StepResult,
    check_cached_prefix,
    check_chain,
    generate,
)

_TYPE_NAMES = {v: k for k, v in KV_TYPES.items()}
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _serialized(
    method: Callable[Concatenate[LlamaCppEngine, _P], _R],
) -> Callable[Concatenate[LlamaCppEngine, _P], _R]:
    """Run ``method`` holding the engine's lock: one llama.cpp call on the context at a time,
    whichever thread (the event loop, an agent's worker thread) makes it."""

    def locked(self: LlamaCppEngine, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    locked.__doc__ = method.__doc__
    return locked


class LlamaKV(SequenceKV):
    """One sequence's KV inside the engine's context; its id is freed when it is dropped."""

    def __init__(self, engine: LlamaCppEngine, seq_id: int, tokens: Sequence[int]) -> None:
        super().__init__(tokens, engine.block_size)
        self.engine_id = id(engine)
        self.seq_id = seq_id
        weakref.finalize(self, engine.release_later, seq_id)


class LlamaCppEngine:
    """Implements ``engine.protocol.Engine`` on a GGUF model (see the module docstring)."""

    def __init__(self, settings: LlamaCppSettings, block_size: int = 16) -> None:
        if block_size < 1:
            raise ValueError(f"block_size: must be positive, got {block_size!r}")
        if not Path(settings.gguf).is_file():
            raise EngineError(f"gguf: no file at {settings.gguf!r}")
        self.settings = settings
        self.block_size = block_size
        self._lib = lib = library()
        model_params = lib.llama_model_default_params()
        self._model = lib.llama_model_load_from_file(settings.gguf.encode(), model_params)
        if not self._model:
            raise EngineError(f"gguf: llama.cpp could not load {settings.gguf!r}")
        vocab = lib.llama_model_get_vocab(self._model)
        self.vocab_size = int(lib.llama_vocab_n_tokens(vocab))
        self.byte_vocabulary = is_byte_vocabulary(lib, vocab)
        self.eos_token = int(lib.llama_vocab_eos(vocab))  # decode agents stop on it
        params = lib.llama_context_default_params()
        params.n_ctx = settings.n_ctx
        params.n_batch = params.n_ubatch = settings.n_batch
        params.n_seq_max = settings.max_sequences
        params.n_threads = params.n_threads_batch = settings.threads
        params.type_k = params.type_v = settings.kv_type_id
        params.flash_attn_type = 1 if settings.flash_attention else 0
        params.kv_unified = True
        params.no_perf = True
        self._ctx = lib.llama_init_from_model(self._model, params)
        if not self._ctx:
            lib.llama_model_free(self._model)
            raise EngineError("llama.cpp could not create a context with these settings")
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(max(settings.n_batch, settings.max_sequences), 0, 1)
        self._free: list[int] = list(range(settings.max_sequences - 1, -1, -1))
        self._released: list[int] = []
        self._closed = False
        self._lock = threading.RLock()
        self.layout = self._probe_layout()

    # --- the Engine protocol -------------------------------------------------------------

    @_serialized
    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult:
        reuse = check_cached_prefix(tokens, cached)
        kv = self._fork(self._own(cached), reuse) if cached is not None else self._new(())
        first = self._run(kv, tokens[reuse:])
        return PrefillResult(kv=kv, first_token=first)

    @_serialized
    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        if not batch:
            return StepResult(tokens=[])
        if len(batch) > self.settings.max_sequences:
            raise EngineError(f"batch: {len(batch)} sequences, max_sequences is lower")
        kvs = [self._own(state.kv) for state in batch]
        self._reclaim()
        rows = [
            (state.last_token, len(kv), kv.seq_id, True)
            for state, kv in zip(batch, kvs, strict=True)
        ]
        logits = self._decode(rows)
        tokens = [int(np.argmax(row)) for row in logits]
        for state, kv, token in zip(batch, kvs, tokens, strict=True):
            kv.tokens.append(state.last_token)
            state.last_token = token
        return StepResult(tokens=tokens)

    @_serialized
    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        if not tokens:
            raise EngineError("tokens: extend needs at least one token")
        own = self._own(context)
        kv = self._fork(own, len(own))
        return ExtendResult(kv=kv, next_token=self._run(kv, tokens))

    @_serialized
    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]:
        own = self._own(kv)
        pieces = state_format.split(self.sequence_state(own), self.block_size, start_block)
        hashes = own.block_hashes(partial=True)
        size = self.block_size
        return [
            KVBlock(
                index, hashes[index], tuple(own.tokens[index * size : (index + 1) * size]), data
            )
            for index, data in enumerate(pieces, start=start_block)
        ]

    @_serialized
    def import_blocks(self, blocks: Sequence[KVBlock]) -> LlamaKV:
        tokens = check_chain(blocks, self.block_size)
        try:
            joined = state_format.join([block.data for block in blocks])
        except state_format.StateFormatError as exc:
            raise EngineError(f"blocks: not llama.cpp KV of this version: {exc}") from None
        if joined.cells != len(tokens):
            raise EngineError(f"blocks: KV of {joined.cells} tokens for {len(tokens)} tokens")
        if joined.layout != self.layout:
            raise EngineError(
                f"blocks: KV stored as {describe(joined.layout)}, this engine stores "
                f"{describe(self.layout)}: engine.llamacpp kv_type and flash_attention must be "
                "equal on every role"
            )
        kv = self._new(tokens)
        data = state_format.serialize(joined)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        read = self._lib.llama_state_seq_set_data(self._ctx, buffer, len(data), kv.seq_id)
        if read != len(data):
            raise EngineError(f"blocks: llama.cpp accepted {read} of {len(data)} bytes")
        return kv

    # --- conveniences ----------------------------------------------------------------------

    def generate(self, tokens: Sequence[int], count: int) -> list[int]:
        """``count`` greedy tokens after ``tokens`` in this process: the reference output."""
        return generate(self, tokens, count)

    @_serialized
    def sequence_state(self, kv: LlamaKV) -> bytes:
        """The sequence's whole KV as llama.cpp serialises it (``llama_state_seq_get_data``)."""
        self._check_open()
        size = int(self._lib.llama_state_seq_get_size(self._ctx, kv.seq_id))
        buffer = (ctypes.c_uint8 * size)()
        written = int(self._lib.llama_state_seq_get_data(self._ctx, buffer, size, kv.seq_id))
        return bytes(buffer)[:written]

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes one token's KV takes in an exported block (cell bookkeeping included)."""
        _, k_formats, v_formats = self.layout
        return 12 + sum(f.row_bytes for f in k_formats) + sum(f.row_bytes for f in v_formats)

    @property
    def free_sequences(self) -> int:
        with self._lock:
            self._reclaim()
            return len(self._free)

    def release_later(self, seq_id: int) -> None:
        """Queue a dropped sequence's id; its cells go at the engine's next call."""
        self._released.append(seq_id)

    @_serialized
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._lib.llama_batch_free(self._batch)
        self._lib.llama_free(self._ctx)
        self._lib.llama_model_free(self._model)

    # --- internals ---------------------------------------------------------------------------

    def _own(self, kv: SequenceKV) -> LlamaKV:
        if not isinstance(kv, LlamaKV) or kv.engine_id != id(self):
            raise EngineError("kv: was not produced by this LlamaCppEngine")
        return kv

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("engine: closed")

    def _reclaim(self) -> None:
        while self._released:
            seq_id = self._released.pop()
            if not self._closed:
                self._lib.llama_memory_seq_rm(self._memory, seq_id, -1, -1)
            self._free.append(seq_id)

    def _new(self, tokens: Sequence[int]) -> LlamaKV:
        self._check_open()
        self._reclaim()
        if not self._free:
            raise EngineError(
                f"engine: all {self.settings.max_sequences} sequences hold KV "
                "(raise engine.llamacpp.max_sequences)"
            )
        return LlamaKV(self, self._free.pop(), tokens)

    def _fork(self, source: LlamaKV, length: int) -> LlamaKV:
        kv = self._new(source.tokens[:length])
        if length:
            self._lib.llama_memory_seq_cp(self._memory, source.seq_id, kv.seq_id, 0, length)
        return kv

    def _run(self, kv: LlamaKV, tokens: Sequence[int]) -> int:
        """Append ``tokens`` to ``kv`` in chunks; the greedy token after the last one."""
        if any(not 0 <= t < self.vocab_size for t in tokens):
            raise EngineError(f"tokens: ids must be in [0, {self.vocab_size})")
        chunk = self.settings.n_batch
        logits: list[np.ndarray[Any, Any]] = []
        for start in range(0, len(tokens), chunk):
            part = tokens[start : start + chunk]
            last = start + len(part) == len(tokens)
            base = len(kv) + start
            rows = [
                (token, base + i, kv.seq_id, last and i == len(part) - 1)
                for i, token in enumerate(part)
            ]
            logits = self._decode(rows)
        kv.tokens.extend(tokens)
        return int(np.argmax(logits[-1]))

    def _decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray[Any, Any]]:
        """One ``llama_decode`` of (token, position, sequence, wants logits) rows."""
        batch = self._batch
        for i, (token, position, seq_id, wants) in enumerate(rows):
            batch.token[i] = token
            batch.pos[i] = position
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = wants
        batch.n_tokens = len(rows)
        status = self._lib.llama_decode(self._ctx, batch)
        if status != 0:
            raise EngineError(f"llama_decode failed with status {status} (KV cache full?)")
        out = []
        for i, row in enumerate(rows):
            if row[3]:
                pointer = self._lib.llama_get_logits_ith(self._ctx, i)
                out.append(np.ctypeslib.as_array(pointer, shape=(self.vocab_size,)).copy())
        return out

    def _probe_layout(self) -> state_format.Layout:
        """This context's KV layout, read from the state of a one-token sequence."""
        kv = self._new(())
        self._run(kv, [0])
        layout = state_format.parse(self.sequence_state(kv)).layout
        del kv
        self._reclaim()
        return layout


def describe(layout: state_format.Layout) -> str:
    """``k=f16 v=f16, flash attention off`` for a state layout (error messages)."""
    v_trans, k_formats, v_formats = layout
    k = _TYPE_NAMES.get(k_formats[0].type_id, str(k_formats[0].type_id)) if k_formats else "?"
    v = _TYPE_NAMES.get(v_formats[0].type_id, str(v_formats[0].type_id)) if v_formats else "?"
    return f"k={k} v={v}, flash attention {'off' if v_trans else 'on'}"


def engine_from_spec(raw: Mapping[str, Any], block_size: int) -> LlamaCppEngine:
    """The engine a topology's ``engine.llamacpp`` section describes.

    With ``gguf_source`` set the GGUF file is first written from the seeded
    ``TinyTransformer`` if it is missing (the file is the same in every process).
    """
    settings = settings_from_mapping(raw)
    ensure_source(settings)
    return LlamaCppEngine(settings, block_size)


@contextmanager
def open_engine(settings: LlamaCppSettings, block_size: int = 16) -> Iterator[LlamaCppEngine]:
    """An engine that is closed on leaving the block (tests and benches)."""
    engine = LlamaCppEngine(settings, block_size)
    try:
        yield engine
    finally:
        engine.close()
