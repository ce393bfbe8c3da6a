"""A P-MD request relayed when its prefill ends (the gateway's check answers P's PREFILLED):
P ships the KV to the relay too, MD learns the route with its KV and takes over by the
handoff, and the client gets one process's greedy tokens. The check's verdict is forced here
(``relay_at_prefill_end``, allowed by the tiny plane's ``allow_route_override``): on a real
line it relays only when the WAN is crowded at that moment."""

from __future__ import annotations

import asyncio
import json

import pytest

from pdd_core.agent.replay import stream_completion
from pdd_core.agent.supervisor.plane import DataPlane
from tests.system.conftest import post
from tests.system.test_pipelines import reference

pytestmark = pytest.mark.system


@pytest.mark.parametrize("mode", ["one-shot", "extend-decode"])
def test_a_p_md_request_relayed_at_the_end_of_its_prefill_gives_the_greedy_tokens(
    tiny_plane: DataPlane, mode: str
) -> None:
    prompt = f"Relayed when the prefill ended, then handed to main decode ({mode})."
    pdd = {"pipeline": "P-MD", "relay_at_prefill_end": True, "handoff_mode": mode}
    status, headers, body = post(
        tiny_plane, "/v1/completions",
        {"prompt": prompt, "max_tokens": 32, "return_token_ids": True, "pdd": pdd},
    )  # fmt: skip

    assert status == 200, body
    assert body["choices"][0]["token_ids"] == reference(prompt, 32)
    usage = body["usage"]["pdd"]
    assert (usage["pipeline"], headers["x-pdd-pipeline"]) == ("P-RLD-MD", "P-RLD-MD")
    assert usage["handoff_mode"] == mode
    assert usage["rld_tokens"] > 0 and usage["md_tokens"] > 0
    assert usage["rld_tokens"] + usage["md_tokens"] == 32
    journal = tiny_plane.run_dir / "journal"
    records = [json.loads(line) for line in (journal / "gateway.jsonl").read_text().splitlines()]
    mine = next(r for r in records if r["request_id"] == usage["request_id"])
    assert (mine["pipeline"], mine["relay_agent"]) == ("P-RLD-MD", "rld-0")
    assert mine["wan_bytes"] == usage["wan_bytes"] > 0  # real bytes on both (tiny: scale 1)


def test_a_streaming_client_reads_the_pipeline_that_served_it_from_the_usage(
    tiny_plane: DataPlane,
) -> None:
    """A stream's headers leave before the check at the end of the prefill, so they name the
    route as admitted (P-MD); the usage chunk at the end names the pipeline that served it.
    ``pdd replay`` and ``pdd parity`` count the latter (they counted the header: a relayed
    request read P-MD while RLD decoded its tokens)."""
    body = {
        "prompt": "Streamed, relayed when the prefill ended.", "max_tokens": 16, "stream": True,
        "stream_options": {"include_usage": True}, "return_token_ids": True,
        "pdd": {"pipeline": "P-MD", "relay_at_prefill_end": True},
    }  # fmt: skip
    result = asyncio.run(stream_completion(tiny_plane.gateway_url, tiny_plane.api_key, body, 60))

    assert result.ok, result.error
    assert result.pipeline == "P-RLD-MD"
    assert result.pdd.rld_tokens > 0
