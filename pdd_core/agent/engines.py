"""The engine an agent runs and the physics its router predicts with.

``make_engine`` builds the configured engine for a role (timed, tiny, llama.cpp or vLLM; the
same weights and seed in every process); ``Predictor`` gives the gateway the prefill and
decode-step seconds those engines follow, from ``pdd_core.perf`` for the timed engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdd_core import perf
from pdd_core.agent.config import DataPlaneConfig
from pdd_core.engine.protocol import (
    DecodeState,
    Engine,
    ExtendResult,
    KVBlock,
    PrefillResult,
    SequenceKV,
    StepResult,
)
from pdd_core.engine.tokenizer import EOS
from pdd_core.specs import load_chips, load_models


def make_engine(config: DataPlaneConfig, role: str, agent_id: str = "") -> Engine:
    """The engine of ``role`` as the configuration says (same weights/seed in every process).

    For ``vllm`` it is the adapter to ``agent_id``'s own vLLM instance.
    """
    spec = config.engine
    if spec.kind == "vllm":
        from pdd_core.engine.vllm.engine import engine_for

        return engine_for(spec.vllm, role, agent_id, spec.block_size)
    if spec.kind == "tiny":
        from pdd_core.engine.tiny import TinyConfig, TinyTransformer

        tiny = TinyTransformer(TinyConfig(block_size=spec.block_size))
        if spec.decode_step_s > 0 or spec.prefill_s > 0:
            return _StepFloor(tiny, spec.decode_step_s, spec.prefill_s)
        return tiny
    if spec.kind == "llamacpp":
        from pdd_core.engine.llamacpp import engine_from_spec

        real = engine_from_spec(spec.llamacpp, spec.block_size)
        if spec.decode_step_s > 0 or spec.prefill_s > 0:
            return _StepFloor(real, spec.decode_step_s, spec.prefill_s)
        return real
    from pdd_core.engine.timed import TimedEngine

    model = load_models()[spec.model]
    chip = load_chips()[spec.chips.get(role, next(iter(spec.chips.values()), "h800"))]
    return TimedEngine(
        model,
        chip,
        tp=spec.shape,
        time_scale=spec.time_scale,
        payload_scale=spec.payload_scale,
        block_size=spec.block_size,
    )


def offloads(config: DataPlaneConfig) -> bool:
    """Whether agents run engine calls in a worker thread (llama.cpp: long real calls)."""
    return config.engine.kind == "llamacpp"


def eos_token(engine: Engine) -> int:
    """The id that ends a stream: the model's own (llama.cpp), else ``ByteTokenizer``'s."""
    return int(getattr(engine, "eos_token", EOS))


class _StepFloor:
    """An engine whose decode steps (prefills) last at least ``step_s`` (``prefill_s``).

    The tiny model decodes in microseconds, faster than any WAN round trip, so without a
    floor a relayed request would finish on RLD before MD could take over.
    """

    def __init__(self, engine: Engine, step_s: float, prefill_s: float = 0.0) -> None:
        self.engine = engine
        self.step_s = step_s
        self.prefill_s = prefill_s
        self.block_size = engine.block_size
        self.vocab_size = engine.vocab_size
        self.eos_token = eos_token(engine)

    def prefill(self, tokens: Sequence[int], cached: SequenceKV | None = None) -> PrefillResult:
        result = self.engine.prefill(tokens, cached)
        return PrefillResult(result.kv, result.first_token, max(result.seconds, self.prefill_s))

    def decode_step(self, batch: Sequence[DecodeState]) -> StepResult:
        result = self.engine.decode_step(batch)
        return StepResult(result.tokens, max(result.seconds, self.step_s))

    def extend(self, context: SequenceKV, tokens: Sequence[int]) -> ExtendResult:
        return self.engine.extend(context, tokens)

    def export_blocks(self, kv: SequenceKV, start_block: int = 0) -> list[KVBlock]:
        return self.engine.export_blocks(kv, start_block)

    def import_blocks(self, blocks: Sequence[KVBlock]) -> SequenceKV:
        return self.engine.import_blocks(blocks)


class Predictor:
    """Predicted prefill and decode-step seconds, from the physics the engines follow.

    The router never derives physics itself (``pdd_core.routing``); the gateway feeds it these.
    TimedEngine's passes are ``pdd_core.perf`` times scaled by ``time_scale``; the tiny model
    has a configured cost per miss token and its decode-step floor. WAN time is
    ``pdd_core.predict``'s (the gateway gives it ``kv_bytes_per_token`` and the line).
    """

    def __init__(self, config: DataPlaneConfig) -> None:
        spec = config.engine
        self._config = config
        if spec.kind == "timed":
            self._model = load_models()[spec.model]
            chips = load_chips()
            self._chips = {
                role: chips[spec.chips.get(role, "h800")] for role in ("prefill", "relay", "main")
            }
            self.kv_bytes_per_token = perf.kv_bytes(self._model, 1) * spec.payload_scale
        elif spec.kind == "llamacpp":
            from pdd_core.engine.llamacpp_config import kv_bytes_per_token, settings_from_mapping

            self.kv_bytes_per_token = kv_bytes_per_token(settings_from_mapping(spec.llamacpp))
        else:
            from pdd_core.engine.tiny import TinyConfig

            self.kv_bytes_per_token = float(TinyConfig().kv_bytes_per_token)

    def prefill_s(self, miss_tokens: int, cached_tokens: int) -> float:
        spec = self._config.engine
        if spec.kind == "timed":
            timing = perf.prefill_time(
                self._model, self._chips["prefill"], max(1, miss_tokens), cached_tokens, spec.shape
            )
            return timing.seconds * spec.time_scale
        return self._config.prefill_s_per_token * miss_tokens

    def decode_step_s(self, role: str, batch: int, context: int = 4096) -> float:
        """One decode step of ``batch`` sequences of ``context`` tokens on ``role``'s chip."""
        spec = self._config.engine
        if spec.kind == "timed":
            timing = perf.decode_step_time(
                self._model, self._chips[role], [context] * max(1, batch), spec.shape
            )
            return timing.seconds * spec.time_scale
        return spec.decode_step_s

    def kv_bytes(self, tokens: int) -> float:
        """Wire bytes of ``tokens`` tokens of KV (payload scale applied)."""
        return max(0, tokens) * self.kv_bytes_per_token
