"""bench_native_replay's P sizing: the queue the gateway predicts, batch by batch, and the
prefill it is built from (the engine's own shape)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bench_native_replay import (
    PrefillQueue,
    prefill_instances,
    prefill_seconds,
    worst_ttft_s,
)
from pdd_core.agent.config import load_config
from pdd_core.agent.engines import Predictor
from pdd_core.workload.request import Request

ROOT = Path(__file__).resolve().parents[2]
TIMED = ROOT / "fixtures" / "dataplane" / "timed.json"


def request(n: int, arrival_s: float, hashes: tuple[int, ...] = (), tokens: int = 1024) -> Request:
    return Request(f"r{n}", arrival_s, tokens, 8, hashes)


def test_the_batch_in_flight_counts_whole_until_it_ends() -> None:
    # Given a P taking two requests per batch, with one 1 s request running since t=0
    queue = PrefillQueue(batch_limit=2)
    queue.add(0.0, 1.0)

    # When two more arrive at t=0 they wait; at t=1.5 they run as one batch (1 s to 3 s)
    held_before = queue.reserved_s(0.0)
    queue.add(0.0, 1.0)
    queue.add(0.0, 1.0)

    # Then the gateway holds the whole batch until it ends, not what is left of it
    assert (held_before, queue.reserved_s(0.0)) == (1.0, 3.0)
    assert queue.reserved_s(1.5) == 2.0
    assert queue.reserved_s(3.0) == 0.0


def test_the_worst_prediction_goes_to_the_least_held_p() -> None:
    requests = [request(n, 0.0) for n in range(3)]

    one_p = worst_ttft_s(requests, [1.0, 1.0, 1.0], instances=1, batch_limit=8)
    two_p = worst_ttft_s(requests, [1.0, 1.0, 1.0], instances=2, batch_limit=8)

    assert (one_p, two_p) == (3.0, 2.0)


def test_prefill_is_the_gateways_prediction_over_the_prefix_shared_before() -> None:
    predictor = Predictor(load_config(TIMED))
    first, second = request(0, 0.0, (1, 2)), request(1, 1.0, (1, 3))

    work = prefill_seconds([first, second], predictor)

    assert work == [predictor.prefill_s(1024, 0), predictor.prefill_s(512, 512)]


def test_a_burst_past_the_bound_on_one_p_gets_a_second() -> None:
    raw = json.loads(TIMED.read_text())
    predictor = Predictor(load_config(TIMED))
    # 40 requests of 64K tokens at once: each prefill is seconds, together past 10 s on one P
    requests = [request(n, 0.0, tokens=65536) for n in range(40)]
    per_request = predictor.prefill_s(65536, 0)
    assert 40 * per_request > raw["sla"]["ttft_p99_s"]

    count, why = prefill_instances(requests, raw)

    # The fewest P whose worst predicted TTFT is within the bound
    assert count >= 2
    assert why.startswith(f"{count} P:")
    assert worst_ttft_s(requests, [per_request] * 40, count, 8) <= 10.0
    assert worst_ttft_s(requests, [per_request] * 40, count - 1, 8) > 10.0
