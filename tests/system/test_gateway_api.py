"""The gateway's HTTP surface on a live plane: OpenAI error shapes, models, chat without
streaming, and the per-request journal in the control plane's record shape."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.records import RECORD_FIELDS
from tests.system.conftest import post

pytestmark = pytest.mark.system


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/completions", {"model": "gpt-9", "prompt": "hi"}, 404, "model_not_found"),
        ("/v1/completions", {"prompt": ""}, 400, None),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, None),
        ("/v1/chat/completions", {"messages": []}, 400, None),
        ("/v1/embeddings", {"input": "hi"}, 404, "not_found"),
    ],
)
def test_bad_requests_get_openai_shaped_errors(
    tiny_plane: DataPlane, path: str, body: dict, status: int, code: str | None
) -> None:
    got, _, payload = post(tiny_plane, path, body)

    assert got == status
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    assert payload["error"]["code"] == code


def test_models_and_a_plain_chat_completion(tiny_plane: DataPlane) -> None:
    request = urllib.request.Request(
        tiny_plane.gateway_url + "/v1/models",
        headers={"Authorization": f"Bearer {tiny_plane.api_key}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        models = json.loads(response.read())
    status, headers, body = post(
        tiny_plane,
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
    )

    assert models["data"][0]["id"] == "tiny-test"
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] == 4
    assert headers["x-pdd-pipeline"] in {"P-MD", "P-RLD-MD", "P-RLD"}


def test_the_gateway_journals_each_request_in_the_telemetry_shape(tiny_plane: DataPlane) -> None:
    # The session's plane is shared: while an earlier test's streams still hold the relay's
    # slots, a forced P-RLD falls back to P-MD (admission's rule); ask again once it has room.
    deadline = time.monotonic() + 30
    while True:
        _, _, body = post(
            tiny_plane,
            "/v1/completions",
            {"prompt": "journal me", "max_tokens": 3, "pdd": {"pipeline": "P-RLD"}},
        )
        if body["usage"]["pdd"]["pipeline"] == "P-RLD" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    request_id = body["usage"]["pdd"]["request_id"]
    journal = tiny_plane.run_dir / "journal" / "gateway.jsonl"
    deadline = time.monotonic() + 10  # the record is written once the response is out
    while True:
        records = [json.loads(line) for line in journal.read_text().splitlines()]
        mine = [r for r in records if r["request_id"] == request_id]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    assert len(mine) == 1
    record = mine[0]
    assert set(RECORD_FIELDS) <= set(record)
    assert record["input_tokens"] == record["hit_tokens"] + record["miss_tokens"] == 11
    assert (record["pipeline"], record["output_tokens"], record["rld_tokens"]) == ("P-RLD", 3, 3)
    assert (record["tenant"], record["site"], record["wan_bytes"]) == ("demo", "dc-a", 0)
    assert record["sla_met"] is True and record["rejected"] is False


def test_a_prompt_over_the_context_window_gets_400_naming_the_limit(
    tiny_plane: DataPlane,
) -> None:
    status, _, body = post(tiny_plane, "/v1/completions", {"prompt": "z" * 5000, "max_tokens": 4})

    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded"
    assert "5001 tokens" in body["error"]["message"]
    assert "4096 tokens" in body["error"]["message"]
