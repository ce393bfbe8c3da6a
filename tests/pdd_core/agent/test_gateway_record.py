"""The gateway's record of a request: its fate, and a failure billed for what it delivered."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pdd_core.agent.gateway.types import (
    Outcome,
    PddUsage,
    RecordContext,
    Route,
    gateway_record,
    real_bytes,
)
from pdd_core.records import AttemptRecord
from pdd_core.routing import Pipeline
from pdd_core.specs import SLA

ROUTE = Route(Pipeline.P_RLD_MD, "relay", "p-1", "rld-0", "md-1", 0, 0, 0.5, 0.2, ticket=1)
CONTEXT = RecordContext("acme", "abc", "deepseek-v3", "dc-a", "gateway")


def _decoded(rld: int, md: int) -> dict[str, Any]:
    """An outcome's tokens: ``rld`` from the relay, then ``md`` from main decode."""
    return {"tokens": [5] * (rld + md), "from_md": bytearray(b"\0" * rld + b"\1" * md),
            "pdd": PddUsage("one-shot", rld_tokens=rld, md_tokens=md)}  # fmt: skip


def test_a_failed_request_is_billed_only_for_the_tokens_the_client_got() -> None:
    # A whole answer of 10,000 tokens that timed out: the client got none of them.
    outcome = Outcome("cmpl-1", ROUTE, **_decoded(4, 9996))
    outcome.first_token_at = outcome.arrival + 0.1
    outcome.error = "agent md-1 went down"

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=True, delivered=0).to_json()

    assert (record["output_tokens"], record["rld_tokens"], record["md_tokens"]) == (0, 0, 0)
    assert (record["ttft_s"], record["tpot_s"]) == (None, None)  # no token reached the client
    assert record["sla_met"] is False
    assert (record["prefill_agent"], record["relay_agent"], record["main_agent"]) == (
        "p-1", "rld-0", "md-1",
    )  # fmt: skip
    assert record["error"] == "agent md-1 went down"


def test_a_served_request_records_every_token_and_who_decoded_them() -> None:
    outcome = Outcome("cmpl-2", ROUTE, **_decoded(8, 32))

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=False, delivered=40).to_json()

    assert (record["output_tokens"], record["rld_tokens"], record["md_tokens"]) == (40, 8, 32)
    assert record["handoff_mode"] == "one-shot"
    assert record["error"] == ""
    assert "attempts" not in record  # one attempt: the record is its own


def test_a_stream_cut_mid_way_splits_exactly_the_tokens_streamed_by_their_decoder() -> None:
    outcome = Outcome("cmpl-5", ROUTE, **_decoded(8, 32))

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=True, delivered=11).to_json()

    assert (record["output_tokens"], record["rld_tokens"], record["md_tokens"]) == (11, 8, 3)


def test_a_resumed_request_counts_the_prefill_the_client_got_and_every_attempts_bytes() -> None:
    # The first attempt prefilled the client's 1,000 tokens (900 hit) and streamed 3 tokens;
    # the resume prefilled those 1,003 tokens elsewhere. The record is the client's prompt.
    outcome = Outcome("cmpl-6", ROUTE, **_decoded(3, 5), prompt_tokens=1000)
    outcome.hit_tokens, outcome.miss_tokens, outcome.prefilled = 900, 100, True
    outcome.attempts = [
        AttemptRecord("cmpl-6", "P-RLD-MD", hit_tokens=900, miss_tokens=100, output_tokens=3,
                      wan_bytes=7_000, error="agent rld-0 went down"),
        AttemptRecord("cmpl-6.r1", "P-MD", hit_tokens=0, miss_tokens=1003, output_tokens=5,
                      wan_bytes=70_000),
    ]  # fmt: skip
    outcome.pdd.wan_bytes = 77_000

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=False).to_json()

    assert (record["input_tokens"], record["hit_tokens"], record["miss_tokens"]) == (1000, 900, 100)
    assert record["wan_bytes"] == sum(a["wan_bytes"] for a in record["attempts"]) == 77_000
    assert [a["error"] for a in record["attempts"]] == ["agent rld-0 went down", ""]


def test_tokens_streamed_before_ps_counts_arrived_take_the_routes_predicted_hit() -> None:
    outcome = Outcome("cmpl-7", replace(ROUTE, hit_tokens_p=640), **_decoded(2, 0),
                      prompt_tokens=1000)  # fmt: skip

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=True, delivered=2).to_json()

    assert (record["input_tokens"], record["hit_tokens"]) == (1000, 640)


def test_a_request_no_prefill_of_ran_counts_no_input() -> None:
    outcome = Outcome("cmpl-8", ROUTE, prompt_tokens=1000)

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=True, delivered=0).to_json()

    assert (record["input_tokens"], record["output_tokens"], record["sla_met"]) == (0, 0, False)


def _timed(ttft_s: float, tpot_s: float, tokens: int = 11) -> Outcome:
    outcome = Outcome("cmpl-3", ROUTE, tokens=[5] * tokens, arrival=100.0)
    outcome.first_token_at = 100.0 + ttft_s
    outcome.last_token_at = outcome.first_token_at + tpot_s * (tokens - 1)
    return outcome


def test_the_record_judges_the_sla_by_the_products_one_rule_the_p90_targets() -> None:
    sla = SLA(ttft_p90_s=2.0, ttft_p99_s=5.0, tpot_p90_s=0.05, tpot_p99_s=0.1)

    def met(ttft_s: float, tpot_s: float) -> object:
        record = gateway_record(_timed(ttft_s, tpot_s), ROUTE, CONTEXT, sla, failed=False)
        return record.to_json()["sla_met"]

    assert met(1.9, 0.04) is True
    assert met(3.0, 0.04) is False  # within the P99 target, over the P90 one
    assert met(1.9, 0.07) is False


def test_wire_bytes_become_real_bytes_with_only_the_kv_payload_scaled_back() -> None:
    # 1.8 MB of KV at 1/1000 of its size, plus 20,711 bytes of frame headers and token ids.
    assert real_bytes(1_820_711, 1_800_000, 0.001) == 1_800_000_000 + 20_711
    assert real_bytes(1_820_711, 1_800_000, 1.0) == 1_820_711
    assert real_bytes(3, 3, 0.5) == 6
    assert real_bytes(0, 0, 0.001) == 0
    with pytest.raises(ValueError, match="payload_scale"):
        real_bytes(10, 10, 0.0)
    with pytest.raises(ValueError, match="kv_bytes"):
        real_bytes(10, 11, 0.001)


def test_the_journal_gives_the_outcomes_wan_bytes_which_are_real_bytes() -> None:
    outcome = Outcome("cmpl-4", ROUTE, tokens=[5] * 4, pdd=PddUsage(wan_bytes=1_820_711_000))

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=False).to_json()

    assert record["wan_bytes"] == 1_820_711_000


def test_the_record_names_the_config_version_that_routed_it() -> None:
    """The version of the first attempt's route (the one the client's request was routed by),
    even if a resumed attempt was routed under a newer one."""
    routed = Route(Pipeline.P_MD, "hit", "p-0", None, "md-0", 0, 0, 0.5, 0.2, config_version=3)
    outcome = Outcome("cmpl-4", routed, tokens=[5] * 4)

    later = Route(Pipeline.P_MD, "resumed", "p-1", None, "md-1", 0, 0, 0.5, 0.2, config_version=4)
    record = gateway_record(outcome, later, CONTEXT, SLA(), failed=False).to_json()
    unversioned = gateway_record(None, ROUTE, CONTEXT, SLA(), failed=True).to_json()

    assert record["config_version"] == 3
    assert unversioned["config_version"] is None
