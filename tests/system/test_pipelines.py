"""Every pipeline and both handoff modes give one process's greedy tokens, over real sockets.

The tiny plane paces RLD's decode steps at 10 ms, so a relayed request is handed to MD after a
few tokens (MD's copy of the KV needs a WAN round trip); each relayed case checks that both
RLD and MD really produced tokens.
"""

from __future__ import annotations

import pytest

from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.engine.tiny import TinyConfig, TinyTransformer
from pdd_core.engine.tokenizer import EOS, ByteTokenizer
from tests.system.conftest import post

pytestmark = pytest.mark.system

MODEL = TinyTransformer(TinyConfig(block_size=16))


def reference(prompt: str, count: int) -> list[int]:
    tokens = MODEL.generate(ByteTokenizer().encode(prompt), count)
    return tokens[: tokens.index(EOS) + 1] if EOS in tokens else tokens


def complete(plane: DataPlane, prompt: str, max_tokens: int, **pdd: str) -> dict:
    status, headers, body = post(
        plane,
        "/v1/completions",
        {"prompt": prompt, "max_tokens": max_tokens, "return_token_ids": True, "pdd": pdd},
    )
    assert status == 200, body
    assert headers["x-pdd-pipeline"] == body["usage"]["pdd"]["pipeline"]
    return body


def counters(plane: DataPlane) -> dict:
    status, body = plane.wan_request("GET", "/counters")
    assert status == 200
    return body


@pytest.mark.parametrize(
    ("pipeline", "mode"),
    [("P-MD", ""), ("P-RLD-MD", "one-shot"), ("P-RLD-MD", "extend-decode"), ("P-RLD", "")],
)
def test_every_pipeline_gives_the_single_process_greedy_tokens(
    tiny_plane: DataPlane, pipeline: str, mode: str
) -> None:
    prompt = f"The quick brown fox jumps over the lazy dog, route {pipeline} {mode}."
    body = complete(tiny_plane, prompt, 32, pipeline=pipeline, handoff_mode=mode)

    assert body["choices"][0]["token_ids"] == reference(prompt, 32)
    usage = body["usage"]["pdd"]
    assert usage["pipeline"] == pipeline
    if pipeline == "P-RLD-MD":
        assert usage["handoff_mode"] == mode
        assert usage["rld_tokens"] > 0 and usage["md_tokens"] > 0
    assert usage["rld_tokens"] + usage["md_tokens"] == 32


def test_a_stream_through_a_handoff_neither_repeats_nor_skips(tiny_plane: DataPlane) -> None:
    prompt = "Stream continuity: tokens before and after the handoff must join exactly."
    status, _, events = post(
        tiny_plane,
        "/v1/completions",
        {
            "prompt": prompt,
            "max_tokens": 30,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
            "pdd": {"pipeline": "P-RLD-MD", "handoff_mode": "extend-decode"},
        },
    )

    assert status == 200
    assert events[-1] == "[DONE]"
    streamed = [t for e in events[:-1] for c in e["choices"] for t in c.get("token_ids", [])]
    assert streamed == reference(prompt, 30)
    usage = events[-2]["usage"]
    assert usage["completion_tokens"] == 30
    assert usage["pdd"]["rld_tokens"] > 0 and usage["pdd"]["md_tokens"] > 0


def test_a_singular_request_sends_nothing_across_the_wan(tiny_plane: DataPlane) -> None:
    before = counters(tiny_plane)
    body = complete(tiny_plane, "x" * 300 + " a singular request", 3, pipeline="P-RLD")
    after = counters(tiny_plane)

    assert body["usage"]["pdd"]["wan_bytes"] == 0
    # Only the gateway's liveness probes (a PING or PONG of about 25 bytes each, every 0.5 s
    # per MD) crossed the line; the prompt's KV alone would be 318 x 256 bytes.
    crossed = after["bytes_up"] + after["bytes_down"] - before["bytes_up"] - before["bytes_down"]
    assert crossed < 2048


def test_the_second_turn_sends_only_its_new_blocks_across_the_wan(tiny_plane: DataPlane) -> None:
    block_bytes = 16 * TinyConfig().kv_bytes_per_token
    turn1 = "user: plan a trip to the mountains with three stops and a lake " * 4
    turn2 = turn1 + "assistant: sure. user: add a museum on the second day please."
    first = complete(tiny_plane, turn1, 4, pipeline="P-MD")
    before = counters(tiny_plane)
    second = complete(tiny_plane, turn2, 4, pipeline="P-MD")
    sent = counters(tiny_plane)["bytes_up"] - before["bytes_up"]

    tokens1, tokens2 = len(ByteTokenizer().encode(turn1)), len(ByteTokenizer().encode(turn2))
    new_blocks = -(-tokens2 // 16) - tokens1 // 16
    assert first["usage"]["pdd"]["wan_bytes"] > (tokens1 // 16) * block_bytes
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == (tokens1 // 16) * 16
    wan = second["usage"]["pdd"]["wan_bytes"]
    assert new_blocks * block_bytes - block_bytes < wan < new_blocks * block_bytes + 4096
    assert wan <= sent < wan + 4096  # the line carried that, plus a few control frames


def test_unknown_keys_get_an_openai_shaped_401(tiny_plane: DataPlane) -> None:
    tiny_plane_key, tiny_plane.api_key = tiny_plane.api_key, "sk-wrong"
    try:
        status, _, body = post(tiny_plane, "/v1/completions", {"prompt": "hi"})
    finally:
        tiny_plane.api_key = tiny_plane_key
    assert status == 401
    assert body["error"]["code"] == "invalid_api_key"


def test_the_openai_client_streams_a_chat_completion_with_usage(tiny_plane: DataPlane) -> None:
    import openai

    client = openai.OpenAI(base_url=tiny_plane.gateway_url + "/v1", api_key=tiny_plane.api_key)
    chunks = list(
        client.chat.completions.create(
            model="tiny-test",
            messages=[{"role": "user", "content": "Say something in bytes."}],
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
            timeout=30,
        )
    )

    usage = chunks[-1].usage
    assert usage is not None
    assert usage.completion_tokens == 6
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens is not None
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [m.id for m in client.models.list().data] == ["tiny-test"]
