"""The ``usage`` of a completion: OpenAI's counts and the ``pdd`` part a client reads back."""

from __future__ import annotations

import json

import pytest

from pdd_core.agent.gateway.openai_format import Completion
from pdd_core.agent.gateway.types import Outcome, PddUsage, Route
from pdd_core.routing import Pipeline

ROUTE = Route(Pipeline.P_RLD_MD, "relay", "p-1", "rld-0", "md-1", 0, 0, 0.5, 0.2, ticket=1)


def test_the_pdd_usage_the_gateway_writes_is_what_a_client_reads_back() -> None:
    served = PddUsage(handoff_mode="one-shot", rld_tokens=8, md_tokens=32, wan_bytes=1_820_711)
    outcome = Outcome("cmpl-1", ROUTE, tokens=[5] * 40, hit_tokens=64, pdd=served)
    completion = Completion(chat=False, model="deepseek-v3", prompt_tokens=128, want_ids=False)

    usage = json.loads(json.dumps(completion.usage(outcome, ROUTE)))

    assert PddUsage.from_dict(usage["pdd"]) == served
    assert usage["pdd"] == {
        "request_id": "cmpl-1",
        "pipeline": "P-RLD-MD",
        "reason": "relay",
        "handoff_mode": "one-shot",
        "rld_tokens": 8,
        "md_tokens": 32,
        "wan_bytes": 1_820_711,
        "prefill": "p-1",
        "main": "md-1",
    }
    assert usage["prompt_tokens_details"] == {"cached_tokens": 64}


def test_a_request_without_an_outcome_reports_zero_pdd_usage() -> None:
    completion = Completion(chat=True, model="deepseek-v3", prompt_tokens=3, want_ids=False)

    usage = completion.usage(None, ROUTE)

    assert PddUsage.from_dict(usage["pdd"]) == PddUsage()
    assert usage["pdd"]["request_id"] == ""


def test_absent_figures_read_as_zero_and_malformed_ones_raise() -> None:
    assert PddUsage.from_dict({}) == PddUsage()
    with pytest.raises(ValueError, match="invalid literal"):
        PddUsage.from_dict({"rld_tokens": "many"})
