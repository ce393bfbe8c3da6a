"""TimedEngine: roofline-paced pseudo tokens that survive every pipeline and handoff unchanged."""

from __future__ import annotations

import asyncio

import pytest

from pdd_core import perf
from pdd_core.engine.protocol import DecodeState, Engine, EngineError, PacedEngine
from pdd_core.engine.timed import TimedEngine
from pdd_core.engine.tokenizer import bpe
from pdd_core.specs import load_chips, load_models

MODEL = load_models()["llama-3.1-8b"]
CHIP = load_chips()["h20"]
PROMPT = list(range(1, 200))


def engine(**kwargs: float) -> TimedEngine:
    return TimedEngine(MODEL, CHIP, block_size=64, **kwargs)  # type: ignore[arg-type]


def generate(e: TimedEngine, count: int) -> list[int]:
    result = e.prefill(PROMPT)
    state = DecodeState("r", result.kv, result.first_token)
    out = [result.first_token]
    while len(out) < count:
        out.append(e.decode_step([state]).tokens[0])
    return out


def test_it_implements_the_engine_protocol() -> None:
    assert isinstance(engine(), Engine)


def test_tokens_are_deterministic_varied_and_depend_on_the_seed() -> None:
    out = generate(engine(), 50)

    assert out == generate(engine(), 50)
    assert len(set(out)) > 10
    assert generate(TimedEngine(MODEL, CHIP, seed=1), 50) != out


@pytest.mark.parametrize("n", [1, 5, 17])
def test_p_rld_md_handoff_by_token_ids_continues_the_same_stream(n: int) -> None:
    reference = generate(engine(), 40)
    prefill, relay, main = engine(), engine(), engine()
    first = prefill.prefill(PROMPT)
    blocks = prefill.export_blocks(first.kv)
    state = DecodeState("r", relay.import_blocks(blocks), first.first_token)
    emitted = [first.first_token]
    while len(emitted) < n:
        emitted.append(relay.decode_step([state]).tokens[0])

    extended = main.extend(main.import_blocks(blocks), emitted)
    out = [*emitted, extended.next_token]
    state = DecodeState("r", extended.kv, extended.next_token)
    while len(out) < 40:
        out.append(main.decode_step([state]).tokens[0])

    assert out == reference


def test_durations_are_the_roofline_times_scaled() -> None:
    e = engine(time_scale=0.5)
    result = e.prefill(PROMPT, e.import_blocks(e.export_blocks(e.prefill(PROMPT[:128]).kv)[:2]))
    state = DecodeState("r", result.kv, result.first_token)
    step = e.decode_step([state, DecodeState("s", e.prefill(PROMPT[:10]).kv, 3)])
    extend = e.extend(result.kv, [1, 2, 3])

    assert result.seconds == 0.5 * perf.prefill_time(MODEL, CHIP, len(PROMPT) - 128, 128).seconds
    assert step.seconds == 0.5 * perf.decode_step_time(MODEL, CHIP, [len(PROMPT), 10]).seconds
    assert extend.seconds == 0.5 * perf.extend_time(MODEL, CHIP, 3, len(PROMPT) + 1).seconds


def test_block_payloads_are_model_kv_bytes_times_the_payload_scale() -> None:
    e = engine(payload_scale=0.01)
    blocks = e.export_blocks(e.prefill(PROMPT).kv)

    assert [len(b.tokens) for b in blocks] == [64, 64, 64, 7]
    assert len(blocks[0].data) == round(MODEL.kv_bytes_per_token * 64 * 0.01)
    assert len(blocks[-1].data) == round(MODEL.kv_bytes_per_token * 7 * 0.01)
    with pytest.raises(EngineError, match="bytes, expected"):
        engine(payload_scale=0.02).import_blocks(blocks)


async def test_paced_engine_sleeps_the_simulated_time_without_blocking_the_loop() -> None:
    paced = PacedEngine(engine(time_scale=1.0))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    result = await paced.prefill(PROMPT)
    task.cancel()

    assert result.seconds > 0
    assert ticks > 1  # other coroutines ran while the prefill "took" its time


def test_tokens_are_bpe_words_and_the_window_is_the_models_context() -> None:

    engine = TimedEngine(load_models()["deepseek-v3"], load_chips()["h800"], time_scale=0)
    result = engine.prefill(list(range(2, 600)))

    assert result.first_token in set(bpe().words)
    assert engine.context_tokens == 163_840
    with pytest.raises(EngineError, match="163840"):
        engine.prefill([5] * 163_841)
