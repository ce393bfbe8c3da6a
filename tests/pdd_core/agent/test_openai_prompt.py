"""Prompt parsing and the output budget: text or token ids, the context window's 400."""

from __future__ import annotations

import pytest

from pdd_core.agent.openai_format import HttpError, output_budget, prompt_tokens, request_text
from pdd_core.engine.tokenizer import bpe


def test_a_prompt_may_be_text_or_token_ids() -> None:
    assert request_text({"prompt": "hello"}, chat=False) == "hello"
    assert request_text({"prompt": [5, 6, 7]}, chat=False) == [5, 6, 7]
    assert prompt_tokens([5, 6, 7], bpe()) == [5, 6, 7]


def test_token_ids_outside_the_vocabulary_are_a_400() -> None:
    with pytest.raises(HttpError) as caught:
        prompt_tokens([5, 4096], bpe())

    assert caught.value.status == 400
    assert "4096" in caught.value.message


def test_max_tokens_is_capped_by_what_the_context_leaves() -> None:
    assert output_budget(1000, 10**9, 16, 163_840) == 162_840
    assert output_budget(1000, None, 16, 163_840) == 16
    assert output_budget(1000, 50, 16, 163_840) == 50


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
