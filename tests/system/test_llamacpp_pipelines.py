"""Every pipeline on llama.cpp gives one process's greedy tokens, with real KV between processes.

The plane is ``fixtures/dataplane/llamacpp.json``: P, RLD and MD each run the exported
TinyTransformer in their own llama.cpp context, and the prompt's KV reaches RLD and MD only as
the bytes ``llama_state_seq_get_data`` wrote on P. A separate receiver process shows the
receiving side really uses those bytes: corrupt one block and its continuation changes.
"""

from __future__ import annotations

import json
import pickle
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.llamacpp_support import require_llama_cpp, tiny_gguf

require_llama_cpp()

from pdd_core.agent.supervisor.plane import DataPlane  # noqa: E402
from pdd_core.engine import llamacpp_state  # noqa: E402
from pdd_core.engine.llamacpp import LlamaCppEngine, open_engine  # noqa: E402
from pdd_core.engine.llamacpp_config import settings_from_mapping  # noqa: E402
from pdd_core.engine.protocol import KVBlock  # noqa: E402
from pdd_core.engine.tiny import TinyConfig, TinyTransformer  # noqa: E402
from pdd_core.engine.tokenizer import EOS, ByteTokenizer  # noqa: E402
from tests.live_server import pdd_command, up_banner  # noqa: E402
from tests.system.conftest import ROOT, post, start_plane  # noqa: E402

pytestmark = pytest.mark.system
TOPOLOGY = ROOT / "fixtures" / "dataplane" / "llamacpp.json"
RECEIVER = """
import json, pickle, sys
from pdd_core.engine.llamacpp import open_engine
from pdd_core.engine.llamacpp_config import settings_from_mapping
from pdd_core.engine.protocol import DecodeState, continue_greedy
settings, blocks, first, count = pickle.load(sys.stdin.buffer)
with open_engine(settings_from_mapping(settings)) as engine:
    out = continue_greedy(engine, DecodeState("r", engine.import_blocks(blocks), first), count)
print(json.dumps(out))
"""


def engine_section(gguf: Path) -> dict[str, object]:
    section = json.loads(TOPOLOGY.read_text())["engine"]
    section["llamacpp"] = dict(section["llamacpp"], gguf=str(gguf))
    return dict(section)


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gguf(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def reference_engine(gguf: Path) -> Iterator[LlamaCppEngine]:
    settings = settings_from_mapping(dict(engine_section(gguf)["llamacpp"]))  # type: ignore[call-overload]
    with open_engine(settings) as engine:
        yield engine


@pytest.fixture(scope="module")
def llama_plane(tmp_path_factory: pytest.TempPathFactory, gguf: Path) -> Iterator[DataPlane]:
    plane = start_plane(tmp_path_factory.mktemp("llamacpp"), TOPOLOGY, engine=engine_section(gguf))
    yield plane
    plane.stop()


def until_eos(tokens: list[int]) -> list[int]:
    return tokens[: tokens.index(EOS) + 1] if EOS in tokens else tokens


def single_process(engine: LlamaCppEngine, prompt: str, count: int) -> list[int]:
    return until_eos(engine.generate(ByteTokenizer().encode(prompt), count))


@pytest.mark.parametrize(
    ("pipeline", "mode"),
    [("P-MD", ""), ("P-RLD-MD", "one-shot"), ("P-RLD-MD", "extend-decode"), ("P-RLD", "")],
)
def test_every_pipeline_on_llama_cpp_gives_the_single_process_greedy_tokens(
    llama_plane: DataPlane, reference_engine: LlamaCppEngine, pipeline: str, mode: str
) -> None:
    prompt = f"The quick brown fox jumps over the lazy dog, route {pipeline} {mode}."
    status, _, body = post(
        llama_plane,
        "/v1/completions",
        {
            "prompt": prompt,
            "max_tokens": 32,
            "return_token_ids": True,
            "pdd": {"pipeline": pipeline, "handoff_mode": mode},
        },
    )

    assert status == 200, body
    expected = single_process(reference_engine, prompt, 32)
    assert body["choices"][0]["token_ids"] == expected
    numpy_model = TinyTransformer(TinyConfig())
    assert expected == until_eos(numpy_model.generate(ByteTokenizer().encode(prompt), 32))
    usage = body["usage"]["pdd"]
    assert usage["pipeline"] == pipeline
    if pipeline == "P-RLD-MD":
        assert usage["handoff_mode"] == mode
        assert usage["rld_tokens"] > 0
        assert usage["md_tokens"] > 0
    if pipeline != "P-RLD":
        assert usage["wan_bytes"] > 0
    assert usage["rld_tokens"] + usage["md_tokens"] == len(expected)
    assert len(expected) > 8  # long enough for a relayed request to reach MD


def test_a_corrupted_block_changes_what_another_process_decodes(
    gguf: Path, reference_engine: LlamaCppEngine
) -> None:
    tokens = ByteTokenizer().encode("Ship this prompt's KV to another process, then break it.")
    prefill = reference_engine.prefill(tokens)
    blocks = reference_engine.export_blocks(prefill.kv)
    state = llamacpp_state.parse(blocks[1].data)
    rng = np.random.default_rng(3)
    noise = tuple(  # finite f16 values: NaN would be refused at import
        rng.normal(0.0, 1.0, v.size // 2).astype(np.float16).view(np.uint8).reshape(v.shape)
        for v in state.values
    )
    corrupted = KVBlock(
        blocks[1].index,
        blocks[1].block_hash,
        blocks[1].tokens,
        llamacpp_state.serialize(
            llamacpp_state.KVState(
                state.positions, state.v_trans, state.k_formats, state.v_formats, state.keys, noise
            )
        ),
    )
    settings = dict(engine_section(gguf)["llamacpp"])  # type: ignore[call-overload]

    def receive(shipped: list[KVBlock]) -> list[int]:
        payload = pickle.dumps((settings, shipped, prefill.first_token, 16))
        result = subprocess.run(
            [sys.executable, "-c", RECEIVER],
            input=payload,
            capture_output=True,
            timeout=120,
            check=True,
            cwd=ROOT,
        )
        return list(json.loads(result.stdout))

    intact = receive(blocks)
    broken = receive([blocks[0], corrupted, *blocks[2:]])

    assert intact == reference_engine.generate(tokens, 16)
    assert broken != intact


def test_pdd_up_then_replay_on_llama_cpp_has_no_failure_and_hits_the_cache(
    tmp_path: Path,
) -> None:
    up = subprocess.Popen(
        [sys.executable, "-m", "pdd_core", "up", str(TOPOLOGY), "--run-dir", str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,  # the fixture's relative GGUF path lands in tmp_path/var/models
    )
    try:
        seen = up_banner(up, timeout_s=120)
        assert "pids" in seen, seen
        command = pdd_command(
            "replay", str(ROOT / "fixtures/traces/mooncake_conversation_sample.jsonl"),
            "--gateway", seen["gateway"], "--api-key", seen["api key"],
            "--speed", "2", "--limit", "12",
            # The fixture's own scaling of the trace for the tiny model (what the demo uses).
            *json.loads(TOPOLOGY.read_text())["demo_replay_args"],
        )  # fmt: skip
        replay = subprocess.run(
            command,
            check=False,
            capture_output=True,
            text=True,
            timeout=400,
            cwd=tmp_path,
        )
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)

    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "failed: 0" in replay.stdout
    cached = re.search(r"cached prompt tokens: (\d+)/(\d+)", replay.stdout)
    assert cached is not None, replay.stdout
    assert int(cached.group(1)) > 0
    assert (tmp_path / "var" / "models" / "tiny-test.gguf").is_file()
