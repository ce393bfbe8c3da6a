"""Engines behind the data-plane agents, all speaking ``protocol.Engine``.

``tiny.TinyTransformer`` is a real numpy transformer that proves the token-ID handoff exact;
``timed.TimedEngine`` paces pseudo tokens by ``pdd_core.perf`` to emulate real accelerators.
"""

from pdd_core.engine.protocol import (
    DecodeState,
    Engine,
    EngineError,
    ExtendResult,
    KVBlock,
    PacedEngine,
    PrefillResult,
    SequenceKV,
    StepResult,
    block_hashes,
)

__all__ = [
    "DecodeState",
    "Engine",
    "EngineError",
    "ExtendResult",
    "KVBlock",
    "PacedEngine",
    "PrefillResult",
    "SequenceKV",
    "StepResult",
    "block_hashes",
]
