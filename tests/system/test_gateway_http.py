"""The gateway as an HTTP/1.1 server on a live plane: keep-alive, chunked request bodies, the
size limits answered with their status in OpenAI's error shape, ``n`` refused, and
``x-pdd-request-id`` on every answer (streams and rejections included)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from pdd_core.agent.gateway.api import MAX_BODY_BYTES, MAX_HEADER_BYTES
from pdd_core.agent.supervisor.plane import DataPlane
from tests.system.conftest import TINY, post, start_plane

pytestmark = pytest.mark.system


def connect(plane: DataPlane) -> http.client.HTTPConnection:
    url = urlsplit(plane.gateway_url)
    assert url.hostname is not None
    return http.client.HTTPConnection(url.hostname, url.port, timeout=30)


def send(
    conn: http.client.HTTPConnection,
    plane: DataPlane,
    method: str,
    path: str,
    body: bytes | Iterable[bytes] | None = None,
    **headers: str,
) -> tuple[http.client.HTTPResponse, bytes]:
    """One request on ``conn``; returns the response (headers) and its whole body."""
    chunked = body is not None and not isinstance(body, bytes)
    conn.request(
        method,
        path,
        body=body,
        headers={"Authorization": f"Bearer {plane.api_key}", **headers},
        encode_chunked=chunked,
    )
    response = conn.getresponse()
    return response, response.read()


def test_two_requests_share_one_kept_alive_connection(tiny_plane: DataPlane) -> None:
    conn = connect(tiny_plane)
    try:
        first, models = send(conn, tiny_plane, "GET", "/v1/models")
        assert conn.sock is not None
        local = conn.sock.getsockname()
        body = json.dumps({"prompt": "again", "max_tokens": 2}).encode()
        second, raw = send(conn, tiny_plane, "POST", "/v1/completions", body)
        assert conn.sock is not None
        same_socket = conn.sock.getsockname() == local
    finally:
        conn.close()

    assert (first.status, first.will_close) == (200, False)
    assert json.loads(models)["data"][0]["id"] == "tiny-test"
    assert (second.status, second.will_close) == (200, False)
    assert json.loads(raw)["usage"]["completion_tokens"] == 2
    assert same_socket is True


def test_a_chunked_request_body_is_read_whole(tiny_plane: DataPlane) -> None:
    pieces = [b'{"prompt": "chunk', b'ed body", "max_tok', b'ens": 3}']
    conn = connect(tiny_plane)
    try:
        response, raw = send(conn, tiny_plane, "POST", "/v1/completions", iter(pieces))
    finally:
        conn.close()

    body = json.loads(raw)
    assert response.status == 200
    assert body["usage"]["prompt_tokens"] == len("chunked body") + 1  # and BOS
    assert body["usage"]["completion_tokens"] == 3
    assert response.headers["x-pdd-request-id"] == body["id"]


def assert_error(response: http.client.HTTPResponse, raw: bytes, status: int, code: str) -> None:
    body = json.loads(raw)
    assert response.status == status
    assert response.headers["Content-Type"].startswith("application/json")
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == code
    assert response.headers["x-pdd-request-id"].startswith("req-")


def test_a_declared_body_over_the_limit_gets_413_and_the_connection_stays_usable(
    tiny_plane: DataPlane,
) -> None:
    conn = connect(tiny_plane)
    try:
        big, raw = send(conn, tiny_plane, "POST", "/v1/completions", b"x" * (MAX_BODY_BYTES + 1))
        models, _ = send(conn, tiny_plane, "GET", "/v1/models")
    finally:
        conn.close()

    assert_error(big, raw, 413, "request_too_large")
    assert models.status == 200


def test_a_chunked_body_growing_over_the_limit_gets_413(tiny_plane: DataPlane) -> None:
    pieces = (b"y" * 1024 * 1024 for _ in range(MAX_BODY_BYTES // (1024 * 1024) + 1))
    conn = connect(tiny_plane)
    try:
        response, raw = send(conn, tiny_plane, "POST", "/v1/completions", pieces)
    finally:
        conn.close()

    assert_error(response, raw, 413, "request_too_large")


def test_a_head_over_the_limit_gets_431_without_a_traceback(tiny_plane: DataPlane) -> None:
    conn = connect(tiny_plane)
    try:
        response, raw = send(
            conn, tiny_plane, "GET", "/v1/models", **{"X-Filler": "a" * (MAX_HEADER_BYTES + 6000)}
        )
    finally:
        conn.close()

    assert_error(response, raw, 431, "headers_too_large")
    assert b"Traceback" not in raw


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"prompt": "hi",', "body: not valid JSON"),
        (b'["prompt"]', "body: must be a JSON object"),
        (b"\xff\xfe{}", "body: not valid JSON"),
    ],
)
def test_a_body_that_is_not_a_json_object_gets_400(
    tiny_plane: DataPlane, body: bytes, message: str
) -> None:
    conn = connect(tiny_plane)
    try:
        response, raw = send(conn, tiny_plane, "POST", "/v1/chat/completions", body)
    finally:
        conn.close()

    assert response.status == 400
    assert json.loads(raw)["error"]["message"] == message


@pytest.mark.parametrize("n", [2, 0, "1", True])
def test_more_than_one_choice_is_refused_not_ignored(tiny_plane: DataPlane, n: Any) -> None:
    status, headers, body = post(tiny_plane, "/v1/completions", {"prompt": "hi", "n": n})

    assert status == 400
    assert (body["error"]["param"], body["error"]["code"]) == ("n", "unsupported_value")
    assert headers["x-pdd-request-id"].startswith("req-")


def test_n_of_one_is_served(tiny_plane: DataPlane) -> None:
    status, _, body = post(tiny_plane, "/v1/completions", {"prompt": "hi", "n": 1, "max_tokens": 2})

    assert status == 200
    assert len(body["choices"]) == 1


def test_wrong_method_and_unknown_path_answer_in_the_openai_shape(tiny_plane: DataPlane) -> None:
    conn = connect(tiny_plane)
    try:
        wrong, wrong_raw = send(conn, tiny_plane, "GET", "/v1/completions")
        unknown, unknown_raw = send(conn, tiny_plane, "GET", "/v2/nothing")
    finally:
        conn.close()

    assert_error(wrong, wrong_raw, 405, "method_not_allowed")
    assert wrong.headers["Allow"] == "POST"
    assert_error(unknown, unknown_raw, 404, "not_found")


def test_a_stream_carries_its_request_id_and_the_usage_chunk(tiny_plane: DataPlane) -> None:
    status, headers, events = post(
        tiny_plane,
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "stream"}],
            "max_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )

    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["transfer-encoding"] == "chunked"
    assert events[-1] == "[DONE]"
    assert {e["id"] for e in events[:-1]} == {headers["x-pdd-request-id"]}
    assert events[-2]["usage"]["completion_tokens"] == 3
    assert events[-2]["usage"]["pdd"]["request_id"] == headers["x-pdd-request-id"]


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPlane]:
    """Prefill predicted at 2 ms per token against a 10 ms TTFT target: every prompt of a few
    tokens is turned away with 429."""
    plane = start_plane(
        tmp_path_factory.mktemp("refusing"),
        TINY,
        prefill_s_per_token=0.002,
        sla={"ttft_p90_s": 0.01, "ttft_p99_s": 0.01},
    )
    yield plane
    plane.stop()


def test_a_rejection_names_its_journal_record_in_x_pdd_request_id(refusing: DataPlane) -> None:
    body = {"prompt": "y" * 50, "max_tokens": 2}
    results = [post(refusing, "/v1/completions", body) for _ in range(3)]
    journal = refusing.run_dir / "journal" / "gateway.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]

    assert [status for status, _, _ in results] == [429, 429, 429]
    ids = [headers["x-pdd-request-id"] for _, headers, _ in results]
    assert [rid[:4] for rid in ids] == ["rej-", "rej-", "rej-"]
    assert [r["request_id"] for r in records] == ids
    assert [r["rejected"] for r in records] == [True, True, True]
    assert [int(headers["retry-after"]) >= 1 for _, headers, _ in results] == [True] * 3


def test_a_client_leaving_mid_stream_is_journaled_and_the_gateway_serves_on(
    tiny_plane: DataPlane,
) -> None:
    body = {"prompt": "leave early", "max_tokens": 400, "stream": True, "pdd": {"pipeline": "P-MD"}}
    conn = connect(tiny_plane)
    try:
        conn.request(
            "POST",
            "/v1/completions",
            body=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {tiny_plane.api_key}"},
        )
        response = conn.getresponse()
        request_id = response.headers["x-pdd-request-id"]
        first = response.read(6)  # the first event has begun
    finally:
        conn.close()
    journal = tiny_plane.run_dir / "journal" / "gateway.jsonl"
    deadline = time.monotonic() + 30
    mine: list[dict[str, Any]] = []
    while not mine and time.monotonic() < deadline:
        lines = journal.read_text().splitlines() if journal.exists() else []
        records = [json.loads(line) for line in lines]
        mine = [r for r in records if r["request_id"] == request_id]
        time.sleep(0.05)
    still = {"prompt": "still here", "max_tokens": 2}
    status, _, after = post(tiny_plane, "/v1/completions", still)

    assert first == b"data: "
    assert len(mine) == 1
    assert mine[0]["sla_met"] is False
    assert mine[0]["output_tokens"] < 400
    assert (status, after["usage"]["completion_tokens"]) == (200, 2)
