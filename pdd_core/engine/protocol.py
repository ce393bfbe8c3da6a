"""The one protocol every engine speaks, so agents are written once for real and timed models.

A P agent prefills over the prefix its cache holds and exports the KV blocks the next stage
lacks; an RLD or MD agent imports blocks, decodes batches, and (MD) extends a context over
token IDs handed to it by RLD (DOMAIN.md section 4). ``TinyTransformer`` does this with real
numpy arithmetic to prove the mechanism is exact; ``TimedEngine`` does it with pseudo tokens
paced by the roofline model so a laptop can emulate a pool of real accelerators.

Conventions every engine keeps:

- A sequence's KV is a ``SequenceKV``: the token ids whose KV it holds, cut into blocks of
  ``block_size`` tokens. A block is named by the hash chain of the tokens up to its end
  (``block_hashes``), the same identity ``RadixCache`` and the traces use, so "which blocks does
  MD already hold" is a radix-cache lookup on hashes.
- Output tokens are produced greedily. A decoding sequence is a ``DecodeState``: its KV plus the
  last generated token, which is not yet in the KV (it is the input of the next step).
- Every operation returns the simulated seconds it stands for (0 for an engine whose cost is
  its real compute time); ``PacedEngine`` sleeps that long without blocking the event loop, so an
  agent keeps batching other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ParamSpec, Protocol, TypeVar, runtime_checkable

import numpy as np

from pdd_core.errors import PddError

ROOT_HASH = 0
_P = ParamSpec("_P")
_R = TypeVar("_R")
_HASH_BYTES = 8


def chain_hash(parent: int, tokens: Sequence[int]) -> int:
    """Hash of a block given its parent block's hash and its own tokens (a 64-bit int).

    BLAKE2b rather than Python's ``hash`` because it must agree across processes and machines:
    P computes it, MD checks it, and both index their caches by it.
    """
    digest = hashlib.blake2b(digest_size=_HASH_BYTES)
    digest.update(parent.to_bytes(_HASH_BYTES, "big"))
    for token in tokens:
        digest.update(token.to_bytes(4, "big"))
    return int.from_bytes(digest.digest(), "big")


def block_hashes(tokens: Sequence[int], block_size: int, *, partial: bool = False) -> list[int]:
    """The hash chain of ``tokens`` cut into blocks: one hash per full block.

    With ``partial`` a trailing incomplete block gets a hash too (it identifies the block on the
    wire); caches index only full blocks, because a partial one still grows. The tokens are
    serialized once (big-endian u32, as ``chain_hash`` does one by one) and each block hashed
    from a slice: the same values as ``chain_hash``, a long prompt at a fraction of the cost.
    """
    if block_size < 1:
        raise ValueError(f"block_size: must be positive, got {block_size!r}")
    stop = len(tokens) if partial else len(tokens) - len(tokens) % block_size
    if stop == 0:
        return []
    data = memoryview(np.asarray(tokens[:stop], dtype=">u4").tobytes())
    hashes: list[int] = []
    parent = ROOT_HASH
    step = block_size * 4
    for start in range(0, stop * 4, step):
        digest = hashlib.blake2b(parent.to_bytes(_HASH_BYTES, "big"), digest_size=_HASH_BYTES)
        digest.update(data[start : start + step])
        parent = int.from_bytes(digest.digest(), "big")
        hashes.append(parent)
    return hashes


@dataclass(frozen=True, slots=True)
class KVBlock:
    """One exported block: its place in the chain, its tokens and its KV as bytes.

    This is what crosses the wire (``pdd_core.agent.protocol.kv_block_frame``) and what a
    decode-side cache stores; ``data`` is engine-specific and opaque to everyone else.
    """

    index: int
    block_hash: int
    tokens: tuple[int, ...]
    data: bytes


class EngineError(PddError, ValueError):
    """An engine was given KV it cannot use: a broken hash chain, a foreign or malformed block."""


class SequenceKV:
    """The KV of one token sequence, block-structured; engines subclass it with their storage."""

    def __init__(self, tokens: Iterable[int], block_size: int) -> None:
        self.tokens: list[int] = list(tokens)
        self.block_size = block_size

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def num_blocks(self) -> int:
        """Blocks including a trailing partial one."""
        return -(-len(self.tokens) // self.block_size)

    def block_hashes(self, *, partial: bool = False) -> list[int]:
        return block_hashes(self.tokens, self.block_size, partial=partial)


@dataclass(slots=True)
class DecodeState:
    """A sequence being decoded: its KV and the last generated token (not yet in the KV)."""

    request_id: str
    kv: SequenceKV
    last_token: int

    @property
    def context(self) -> int:
        """Tokens the next step attends over, counting the pending one."""
        return len(self.kv) + 1


@dataclass(frozen=True, slots=True)
class PrefillResult:
    """KV of the whole prompt, the first output token, and the pass's simulated seconds."""

    kv: SequenceKV
    first_token: int
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ExtendResult:
    """KV extended over the handed-over tokens and the token that follows them."""

    kv: SequenceKV
    next_token: int
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class StepResult:
    """One decode step: the next token of each sequence, in batch order."""

    tokens: list[int]
    seconds: float = 0.0


@runtime_checkable
class Engine(Protocol):
    """Prefill, decode, extend, export and import: everything an agent asks of a model.

    ``prefill`` computes only the tokens ``cached`` does not hold (its tokens must be a prefix of
    ``tokens``; a full hit recomputes the last token, as it is needed for the first output).
    ``decode_step`` advances every state by one token in place. ``extend`` is the token-ID
    handoff's recompute: ``context`` plus ``tokens`` in one prefill-like pass, returning the
    token that follows. ``export_blocks`` yields blocks from ``start_block`` on (the trailing
    partial one included); ``import_blocks`` rebuilds a ``SequenceKV`` from a chain of blocks
    starting at block 0, verifying the chain.
    """

    block_size: int
    vocab_size: int

    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult: ...

    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult: ...

    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult: ...

    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]: ...

    def import_blocks(self, blocks: Sequence[KVBlock]) -> SequenceKV: ...


def continue_greedy(engine: Engine, state: DecodeState, count: int) -> list[int]:
    """``count`` greedy tokens of a decoding sequence: its pending token, then one per step."""
    out = [state.last_token]
    while len(out) < count:
        out.append(engine.decode_step([state]).tokens[0])
    return out[:count]


def generate(engine: Engine, tokens: Sequence[int], count: int) -> list[int]:
    """``count`` greedy tokens after ``tokens`` in one process: the reference output."""
    result = engine.prefill(tokens)
    return continue_greedy(engine, DecodeState("generate", result.kv, result.first_token), count)


def check_chain(blocks: Sequence[KVBlock], block_size: int) -> list[int]:
    """Verify that ``blocks`` form the hash chain of their tokens from block 0; return the tokens.

    Only the last block may be partial. Raises ``EngineError`` naming the first bad block, so an
    agent can drop a corrupt or misordered transfer instead of decoding garbage.
    """
    parent = ROOT_HASH
    tokens: list[int] = []
    for position, block in enumerate(blocks):
        if block.index != position:
            raise EngineError(f"block {position}: has index {block.index}")
        if not block.tokens or len(block.tokens) > block_size:
            raise EngineError(f"block {position}: holds {len(block.tokens)} tokens")
        if len(block.tokens) < block_size and position != len(blocks) - 1:
            raise EngineError(f"block {position}: only the last block may be partial")
        parent = chain_hash(parent, block.tokens)
        if parent != block.block_hash:
            raise EngineError(f"block {position}: hash does not match its tokens and parent")
        tokens.extend(block.tokens)
    return tokens


def check_cached_prefix(tokens: Sequence[int], cached: SequenceKV | None) -> int:
    """Tokens of ``tokens`` to reuse from ``cached``: its length, capped to leave one to compute.

    Raises ``EngineError`` if ``cached`` is not a prefix of ``tokens`` (a cache bug that would
    otherwise produce silently wrong output).
    """
    if not tokens:
        raise EngineError("tokens: a prompt needs at least one token")
    if cached is None:
        return 0
    if len(cached) > len(tokens) or list(tokens[: len(cached)]) != cached.tokens:
        raise EngineError("cached: its tokens are not a prefix of the prompt")
    return min(len(cached), len(tokens) - 1)


async def pace(started: float, seconds: float) -> None:
    """Sleep until ``seconds`` after ``started`` (``time.monotonic``); at least yield once, so
    a chain of operations never starves the event loop."""
    await asyncio.sleep(max(0.0, started + seconds - time.monotonic()))


class PacedEngine:
    """Async facade over an engine: runs each operation, then sleeps out its simulated seconds.

    Agents await these instead of calling the engine directly, so a roofline-timed engine holds
    the request for as long as the modelled chip would while the event loop serves other
    connections. The operation ends ``seconds`` after it started: the host's own time computing
    it (a timed engine's bookkeeping, a few ms for a long prompt) counts toward them instead of
    adding to them. With ``offload`` the computation itself runs in a worker thread (for an
    engine whose real compute is not negligible, such as a larger ``TinyTransformer``).
    """

    def __init__(self, engine: Engine, *, offload: bool = False) -> None:
        self.engine = engine
        self._offload = offload

    async def prefill(
        self, tokens: Sequence[int], cached: SequenceKV | None = None
    ) -> PrefillResult:
        started = time.monotonic()
        result = await self._run(self.engine.prefill, tokens, cached)
        await pace(started, result.seconds)
        return result

    async def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        started = time.monotonic()
        result = await self._run(self.engine.decode_step, batch)
        await pace(started, result.seconds)
        return result

    async def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        started = time.monotonic()
        result = await self._run(self.engine.extend, context, tokens)
        await pace(started, result.seconds)
        return result

    async def _run(self, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self._offload:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return fn(*args, **kwargs)
