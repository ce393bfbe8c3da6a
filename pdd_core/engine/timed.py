"""TimedEngine: pseudo tokens at the pace of a modelled accelerator, KV of a modelled size.

A laptop cannot run a 1T-parameter model, but the data plane's behaviour (queues, batching,
TTFT, handoff stalls, WAN transfer times) depends only on how long each pass takes and how many
bytes of KV move. This engine takes both from the physics: every operation returns the
``pdd_core.perf`` time of that pass for the configured model and chip (times ``time_scale``),
and every exported block carries ``kv_bytes(model, tokens) x payload_scale`` bytes. With a
``payload_scale`` of 1/100 and a WAN emulator bandwidth scaled by the same factor, transfer
times stay faithful while the demo moves a hundredth of the bytes.

Tokens are ids of the shipped BPE vocabulary (``engine.tokenizer``): single-token words, so a
stream reads as (random) words and every id decodes; the context window is the model's
``max_context`` from the catalog (``context_tokens``), and a longer sequence is an
``EngineError``. Tokens are pseudo-random but a pure function of the engine seed and the
sequence so far, the way a greedy model's output is a function of its context. That is
what lets MD, given only RLD's token IDs, continue RLD's stream exactly: a seed by
request id alone would have to travel with the KV, and the handoff deliberately sends
nothing but token IDs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from pdd_core import perf
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
)
from pdd_core.engine.tokenizer import BYTE_VALUES, EOS, bpe
from pdd_core.specs import ChipSpec, ModelSpec


def _token_bytes(tokens: Iterable[int]) -> bytes:
    """Token ids as little-endian u32 (the same bytes on every host)."""
    return np.fromiter(tokens, dtype="<u4").tobytes()


def _words() -> tuple[int, ...]:
    """The output vocabulary: the BPE's single-token words (never an id the tiny model's
    tokenizer treats as special, so ``EOS`` checks cannot end a timed stream early)."""
    return tuple(w for w in bpe().words if w not in (BYTE_VALUES, EOS))


class TimedKV(SequenceKV):
    """Tokens and a running hash of them; no tensors (the bytes exist only on the wire).

    The hash is BLAKE2b over the seed and the tokens' bytes, updated as tokens are appended
    (in C: a 100K-token context costs well under a millisecond, where a per-token Python step
    cost the timed agents tens of milliseconds per long prompt on top of the modelled time).
    """

    def __init__(
        self, tokens: Iterable[int], block_size: int, seed: int, words: Sequence[int] = ()
    ) -> None:
        super().__init__((), block_size)
        self.seed = seed
        self.words = words or _words()
        self.state = hashlib.blake2b(seed.to_bytes(8, "little", signed=True), digest_size=8)
        self.append(tokens)

    def append(self, tokens: Iterable[int]) -> None:
        tokens = list(tokens)
        self.tokens.extend(tokens)
        self.state.update(_token_bytes(tokens))

    def next_token(self, pending: Sequence[int] = ()) -> int:
        """The pseudo token that follows this sequence plus ``pending``."""
        state = self.state.copy()
        if pending:
            state.update(_token_bytes(pending))
        return self.words[int.from_bytes(state.digest(), "little") % len(self.words)]

    def copy(self) -> TimedKV:
        kv = TimedKV((), self.block_size, self.seed, self.words)
        kv.tokens, kv.state = list(self.tokens), self.state.copy()
        return kv


class TimedEngine:
    """Implements ``engine.protocol.Engine`` with roofline timing (see the module docstring).

    ``time_scale`` multiplies every simulated duration (0 = no pacing, for throughput
    benches); ``payload_scale`` multiplies KV bytes on the wire. ``tp`` is the instance's
    tensor-parallel degree or its whole ``InstanceShape``, as in ``pdd_core.perf``.
    """

    def __init__(
        self,
        model: ModelSpec,
        chip: ChipSpec,
        *,
        tp: perf.ShapeLike = 1,
        time_scale: float = 1.0,
        payload_scale: float = 1.0,
        block_size: int = 64,
        seed: int = 0,
    ) -> None:
        if time_scale < 0 or payload_scale < 0:
            raise ValueError("time_scale, payload_scale: must be non-negative")
        if block_size < 1:
            raise ValueError(f"block_size: must be positive, got {block_size!r}")
        self.model, self.chip, self.tp = model, chip, tp
        self.time_scale = time_scale
        self.payload_scale = payload_scale
        self.block_size = block_size
        self.vocab_size = bpe().vocab_size
        self.context_tokens = model.max_context
        self.seed = seed

    def block_bytes(self, tokens: int) -> int:
        """Bytes a block of ``tokens`` tokens carries on the wire."""
        return round(perf.kv_bytes(self.model, tokens) * self.payload_scale)

    def _fits(self, tokens: int) -> None:
        if tokens > self.context_tokens:
            raise EngineError(
                f"context: {tokens} tokens exceed {self.model.name}'s window of "
                f"{self.context_tokens}"
            )

    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult:
        self._fits(len(tokens))
        reuse = check_cached_prefix(tokens, cached)
        kv = TimedKV(tokens[:reuse], self.block_size, self.seed)
        if cached is not None:
            self._own(cached)
        kv.append(tokens[reuse:])
        timing = perf.prefill_time(self.model, self.chip, len(tokens) - reuse, reuse, self.tp)
        return PrefillResult(kv, kv.next_token(), timing.seconds * self.time_scale)

    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        if not batch:
            return StepResult(tokens=[])
        contexts = [len(self._own(state.kv)) for state in batch]
        tokens = []
        for state in batch:
            kv = self._own(state.kv)
            kv.append([state.last_token])
            state.last_token = kv.next_token()
            tokens.append(state.last_token)
        timing = perf.decode_step_time(self.model, self.chip, contexts, self.tp)
        return StepResult(tokens, timing.seconds * self.time_scale)

    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        if not tokens:
            raise EngineError("tokens: extend needs at least one token")
        self._fits(len(context) + len(tokens))
        kv = self._own(context).copy()
        kv.append(tokens)
        timing = perf.extend_time(self.model, self.chip, len(tokens), len(context), self.tp)
        return ExtendResult(kv, kv.next_token(), timing.seconds * self.time_scale)

    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]:
        own = self._own(kv)
        hashes = own.block_hashes(partial=True)
        size = self.block_size
        out = []
        for index in range(start_block, own.num_blocks):
            tokens = tuple(own.tokens[index * size : (index + 1) * size])
            out.append(KVBlock(index, hashes[index], tokens, bytes(self.block_bytes(len(tokens)))))
        return out

    def import_blocks(self, blocks: Sequence[KVBlock]) -> TimedKV:
        tokens = check_chain(blocks, self.block_size)
        for block in blocks:
            expected = self.block_bytes(len(block.tokens))
            if len(block.data) != expected:
                raise EngineError(
                    f"block {block.index}: {len(block.data)} bytes, expected {expected}"
                )
        return TimedKV(tokens, self.block_size, self.seed)

    def _own(self, kv: SequenceKV) -> TimedKV:
        if not isinstance(kv, TimedKV) or kv.seed != self.seed:
            raise EngineError("kv: was not produced by a TimedEngine with this seed")
        return kv
