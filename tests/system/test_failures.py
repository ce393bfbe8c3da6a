"""Overload and dead agents: 429 with Retry-After, streams that resume, none left hanging.

The module's plane predicts 2 ms of prefill per miss token against a 0.5 s TTFT target (and
makes a prefill last 0.3 s), so a burst of long prompts fills both P queues and the rest are
rejected early (Mooncake-style admission); its window is cut to 300 tokens. A test that kills
agents gets a plane of its own (``lossy``), so the tests hold in any order.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.supervisor.plane import DataPlane
from tests.system.conftest import (
    TINY,
    agents_up,
    post,
    running_plane,
    start_plane,
    stream_killing,
    tracebacks,
    wait_until,
)
from tests.system.test_pipelines import reference

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPlane]:
    yield from running_plane(
        tmp_path_factory.mktemp("overload"),
        TINY,
        prefill_s_per_token=0.002,
        sla={"ttft_p90_s": 0.5, "ttft_p99_s": 0.5},
        limits={"idle_timeout_s": 3.0, "max_prompt_tokens": 300},
        engine={"prefill_s": 0.3},  # a burst's prefills really overlap
    )


@pytest.fixture
def lossy(tmp_path: Path) -> Iterator[DataPlane]:
    """A plane of the test's own, for killing agents in."""
    plane = start_plane(tmp_path, TINY, limits={"idle_timeout_s": 3.0})
    yield plane
    plane.stop()


def test_max_tokens_beyond_the_window_is_a_400_before_any_work(plane: DataPlane) -> None:
    prompt = "y" * 249  # 250 byte tokens with BOS: 50 left in this plane's 300-token window
    journal = plane.run_dir / "journal" / "gateway.jsonl"
    before = journal.read_text().count("\n") if journal.exists() else 0

    answers = [
        post(plane, "/v1/completions", {"prompt": prompt, "max_tokens": asked})
        for asked in (51, 10**9, 2**64)
    ]
    status, _, body = post(plane, "/v1/completions", {"prompt": prompt, "max_tokens": 50,
                                                      "pdd": {"pipeline": "P-RLD"}})  # fmt: skip

    for refused, _, error in answers:
        assert refused == 400, error
        assert (error["error"]["code"], error["error"]["param"]) == (
            "context_length_exceeded", "max_tokens")  # fmt: skip
        assert "leave 50" in error["error"]["message"]
    assert status == 200
    assert body["usage"]["completion_tokens"] == len(reference(prompt, 50))
    after = journal.read_text().count("\n")
    assert after == before + 1  # the refused ones did no work and left no record


def test_a_request_past_the_gateways_time_limit_is_a_504_naming_it(tmp_path: Path) -> None:
    """A request that outlives ``limits.request_timeout_s`` (here: a prefill slower than the
    limit, which the gateway cannot know in advance) is the gateway's own bound, not a silent
    agent: 504 naming the limit, never resumed on another agent. One whose ``max_tokens``
    could not be decoded within the limit at the model's decode speed is a 400 up front."""
    slow = start_plane(
        tmp_path, TINY,
        limits={"request_timeout_s": 2.0, "idle_timeout_s": 3.0},
        engine={"decode_step_s": 0.05, "prefill_s": 2.5},  # 40 tokens take 2 s
    )  # fmt: skip
    try:
        body = {"prompt": "story 0", "max_tokens": 20, "pdd": {"pipeline": "P-RLD"}}
        status, _, whole = post(slow, "/v1/completions", body)
        _, _, events = post(slow, "/v1/completions", {**body, "stream": True})
        too_long, _, refusal = post(slow, "/v1/completions", {**body, "max_tokens": 400})
    finally:
        slow.stop()

    assert status == 504, whole
    assert whole["error"]["code"] == "request_timeout"
    assert "limits.request_timeout_s" in whole["error"]["message"]
    errors = [e for e in events if isinstance(e, dict) and "error" in e]
    assert [e["error"]["code"] for e in errors] == ["request_timeout"], events
    assert too_long == 400, refusal
    assert refusal["error"]["code"] == "max_tokens_exceeds_timeout"
    assert tracebacks(slow.run_dir) == []
    log = (slow.run_dir / "gateway.log").read_text()
    assert "resuming" not in log  # nothing blamed, nothing retried
    records = [json.loads(line) for line in (slow.run_dir / "journal" / "gateway.jsonl").open()]
    assert [(r["sla_met"], r["output_tokens"]) for r in records] == [(False, 0), (False, 0)]
    assert all("limits.request_timeout_s" in r["error"] for r in records)


def test_a_burst_beyond_the_ttft_target_gets_429_with_retry_after(plane: DataPlane) -> None:
    # A prompt no other test sent: a cached prefix would make the prefills cheap.
    fresh = uuid.uuid4().hex * 7  # 224 bytes
    body = {"prompt": fresh[:200], "max_tokens": 20, "pdd": {"pipeline": "P-RLD"}}
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: post(plane, "/v1/completions", body), range(8)))

    statuses = sorted(status for status, _, _ in results)
    assert 200 in statuses, statuses
    assert 429 in statuses, statuses
    for status, headers, payload in results:
        if status == 429:
            assert int(headers["retry-after"]) >= 1
            assert payload["error"]["code"] == "rate_limit_exceeded"
    journal = plane.run_dir / "journal" / "gateway.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sum(r["rejected"] for r in records) == statuses.count(429)


def _kill_every_main_decode(plane: DataPlane) -> None:
    """Kill both MD agents and wait (bounded) until the gateway has noticed the lost links."""
    for agent_id in ("md-0", "md-1"):
        plane.kill(agent_id)
    wait_until(lambda: not any(agents_up(plane)[a] for a in ("md-0", "md-1")), timeout_s=10)


def test_killing_main_decode_mid_stream_resumes_the_stream_on_the_relay(
    lossy: DataPlane,
) -> None:
    body = {"prompt": "short", "max_tokens": 200, "return_token_ids": True,
            "stream_options": {"include_usage": True}, "pdd": {"pipeline": "P-MD"}}  # fmt: skip

    lines = stream_killing(lossy, body, kill=("md-0", "md-1"))

    events = [json.loads(line) for line in lines[:-1]]
    streamed = [t for e in events for c in e["choices"] for t in c.get("token_ids", [])]
    assert [e for e in events if "error" in e] == []
    expected = reference("short", 200)  # the same greedy stream, across the resume
    assert streamed == expected
    usage = events[-1]["usage"]
    assert usage["completion_tokens"] == len(expected)
    assert usage["pdd"]["rld_tokens"] > 0


def test_after_losing_every_main_decode_requests_finish_on_the_relay(lossy: DataPlane) -> None:
    _kill_every_main_decode(lossy)

    status, headers, body = post(
        lossy, "/v1/completions", {"prompt": "still here", "max_tokens": 5}
    )

    assert status == 200
    assert headers["x-pdd-pipeline"] == "P-RLD"
    assert body["usage"]["completion_tokens"] == 5


def test_killing_the_relay_mid_stream_ends_it_and_new_requests_get_503(lossy: DataPlane) -> None:
    # Without MD nothing can take the stream over: the relay is the last decode agent.
    _kill_every_main_decode(lossy)
    body = {"prompt": "relay me", "max_tokens": 400, "pdd": {"pipeline": "P-RLD"}}

    lines = stream_killing(lossy, body, kill=("rld-0",), timeout=20)
    answers: list[tuple[int, Any]] = []

    def refused() -> bool:
        status, _, after = post(lossy, "/v1/completions", {"prompt": "anyone?", "max_tokens": 2})
        answers.append((status, after))
        return status == 503

    wait_until(refused, timeout_s=10)

    assert json.loads(lines[-2])["error"]["type"] == "server_error"
    status, after = answers[-1]
    assert status == 503
    assert after["error"]["type"] == "server_error"


def test_a_slow_but_alive_prefill_keeps_its_request_past_the_first_token_wait(
    tmp_path: Path,
) -> None:
    """One P whose pass (2 s) outlasts the first-token wait (max(idle 0.5 s, 2 x TTFT p99
    0.2 s)): the gateway pings P, P answers, and the request is served by it, not routed again
    (with one P that failed it after the 200: "no prefill agent is reachable")."""
    raw = json.loads(TINY.read_text())
    agents = [a for a in raw["agents"] if a["id"] != "p-1"]
    slow = start_plane(
        tmp_path, TINY, agents=agents, engine={"prefill_s": 2.0},
        sla={"ttft_p90_s": 0.1, "ttft_p99_s": 0.1},
        limits={"idle_timeout_s": 0.5, "request_timeout_s": 20},
    )  # fmt: skip
    try:
        prompt = "a slow prefill"
        body = {"prompt": prompt, "max_tokens": 4, "pdd": {"pipeline": "P-RLD"}}
        status, _, whole = post(slow, "/v1/completions", body)
        _, _, events = post(slow, "/v1/completions", {**body, "stream": True})
    finally:
        slow.stop()

    assert status == 200, whole
    assert whole["usage"]["completion_tokens"] == len(reference(prompt, 4))
    assert events[-1] == "[DONE]" and not any("error" in e for e in events[:-1]), events
    log = (slow.run_dir / "gateway.log").read_text()
    assert "resuming" not in log and "timed out waiting" not in log
    assert tracebacks(slow.run_dir) == []
