"""Prompt parsing and admission of what a request asks: text or token ids, ``max_tokens``
within the context window and the timeout (400s before any work), unsupported parameters."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.config import load_config
from pdd_core.agent.gateway.openai_format import (
    HttpError,
    output_budget,
    prompt_tokens,
    refuse_unsupported,
    request_text,
)
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.supervisor.plane import resolve
from pdd_core.engine.tokenizer import bpe

TIMED = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "timed.json"


def test_a_prompt_may_be_text_or_token_ids() -> None:
    assert request_text({"prompt": "hello"}, chat=False) == "hello"
    assert request_text({"prompt": [5, 6, 7]}, chat=False) == [5, 6, 7]
    assert prompt_tokens([5, 6, 7], bpe()) == [5, 6, 7]


def test_token_ids_outside_the_vocabulary_are_a_400() -> None:
    with pytest.raises(HttpError) as caught:
        prompt_tokens([5, 4096], bpe())

    assert caught.value.status == 400
    assert "4096" in caught.value.message


def test_max_tokens_past_what_the_context_leaves_is_a_400_before_any_work() -> None:
    for asked in (162_841, 10**9, 2**64):
        with pytest.raises(HttpError) as caught:
            output_budget(1000, asked, 16, 163_840)
        assert (caught.value.status, caught.value.code) == (400, "context_length_exceeded")
        assert caught.value.param == "max_tokens"
        assert "leave 162840" in caught.value.message
    assert output_budget(1000, 162_840, 16, 163_840) == 162_840
    assert output_budget(1000, 50, 16, 163_840) == 50


def test_max_tokens_past_what_the_timeout_lets_the_model_decode_is_a_400() -> None:
    with pytest.raises(HttpError) as caught:
        output_budget(1000, 40_001, 16, 163_840, decodable=40_000)

    assert (caught.value.status, caught.value.code) == (400, "max_tokens_exceeds_timeout")
    assert "at most 40000 tokens" in caught.value.message
    assert output_budget(1000, 40_000, 16, 163_840, decodable=40_000) == 40_000


def test_left_out_max_tokens_is_the_default_capped_by_both_bounds() -> None:
    assert output_budget(1000, None, 16, 163_840) == 16
    assert output_budget(4090, None, 16, 4096) == 6
    assert output_budget(10, None, 16, 4096, decodable=3) == 3


def test_the_gateways_decode_bound_follows_the_models_speed_and_the_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # DeepSeek-V3 timed on H20 / H800 (timed.json: tp 8 x pp 2, half speed), 120 s a request.
    config, _ = resolve(load_config(TIMED), tmp_path)
    gateway = Gateway(config, "gateway")
    prompt = 97 * 1024  # a multiple of the memo's bucket
    short, long = gateway.decodable_tokens(10), gateway.decodable_tokens(prompt)
    assert short is not None and long is not None

    def step(context: float) -> float:
        return min(
            gateway.router.predictor.decode_step_s(r, 1, int(context)) for r in ("relay", "main")
        )

    assert 1000 < long < short <= 120 / step(10)  # the longer context decodes slower
    # That many tokens take at least their steps at the mean context; one more would not fit.
    assert long * step(prompt + long / 2) <= 120 < (long + 1) * step(prompt + (long + 1) / 2)
    limits = replace(config.limits, request_timeout_s=12)
    shorter = Gateway(replace(config, limits=limits), "gateway")
    assert (shorter.decodable_tokens(prompt) or 0) < long / 9


UNSUPPORTED_ASKS = [
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"logprobs": True}, "logprobs"),
    ({"logprobs": 1}, "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"logit_bias": {"5": 10}}, "logit_bias"),
    ({"stop": ["\n"]}, "stop"),
    ({"n": 2}, "n"),
]


@pytest.mark.parametrize(("body", "name"), UNSUPPORTED_ASKS)
def test_an_unsupported_parameter_is_a_400_naming_it(body: dict[str, Any], name: str) -> None:
    with pytest.raises(HttpError) as caught:
        refuse_unsupported(body)

    assert (caught.value.status, caught.value.param) == (400, name)
    assert caught.value.message.startswith(f"{name}: not supported")


def test_several_unsupported_parameters_are_all_named_and_harmless_values_pass() -> None:
    with pytest.raises(HttpError) as caught:
        refuse_unsupported({"tools": [{}], "logprobs": True, "stop": "x"})
    assert caught.value.message.startswith("logprobs, stop, tools: not supported")

    refuse_unsupported({"logprobs": False, "tools": [], "response_format": {"type": "text"},
                        "stop": None, "n": 1, "temperature": 0.7, "seed": 3})  # fmt: skip


def test_a_prompt_that_fills_the_window_is_a_400_naming_the_limit() -> None:
    with pytest.raises(HttpError) as caught:
        output_budget(163_840, 10, 16, 163_840)

    assert caught.value.status == 400
    assert caught.value.code == "context_length_exceeded"
    assert "163840 tokens" in caught.value.message


@pytest.mark.parametrize("bad", [0, -1, True, "10", 1.5])
def test_max_tokens_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(HttpError) as caught:
        output_budget(10, bad, 16, 100)

    assert caught.value.status == 400
