"""The gateway's record of a request: its fate, and a failure billed for what it delivered."""

from __future__ import annotations

import pytest

from pdd_core.agent.gateway_types import (
    Outcome,
    PddUsage,
    RecordContext,
    Route,
    gateway_record,
    real_bytes,
)
from pdd_core.routing import Pipeline
from pdd_core.specs import SLA

ROUTE = Route(Pipeline.P_RLD_MD, "relay", "p-1", "rld-0", "md-1", 0, 0, 0.5, 0.2, ticket=1)
CONTEXT = RecordContext("acme", "abc", "deepseek-v3", "dc-a", "gateway")


def test_a_failed_request_is_billed_only_for_the_tokens_the_client_got() -> None:
    outcome = Outcome(
        "cmpl-1", ROUTE, tokens=list(range(10_000)), pdd=PddUsage(rld_tokens=4, md_tokens=9996)
    )
    outcome.error = "agent md-1 went down"

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=True, delivered=0).to_json()

    assert record["output_tokens"] == 0
    assert record["sla_met"] is False
    assert (record["prefill_agent"], record["relay_agent"], record["main_agent"]) == (
        "p-1", "rld-0", "md-1",
    )  # fmt: skip
    assert record["error"] == "agent md-1 went down"


def test_a_served_request_records_every_token_and_who_decoded_them() -> None:
    outcome = Outcome(
        "cmpl-2", ROUTE, tokens=[5] * 40, pdd=PddUsage("one-shot", rld_tokens=8, md_tokens=32)
    )

    record = gateway_record(outcome, ROUTE, CONTEXT, SLA(), failed=False, delivered=40).to_json()

    assert (record["output_tokens"], record["rld_tokens"], record["md_tokens"]) == (40, 8, 32)
    assert record["handoff_mode"] == "one-shot"
    assert record["error"] == ""


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
