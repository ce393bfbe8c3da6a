"""A GGUF with its own vocabulary is served with that vocabulary, end to end.

The model is the TinyTransformer exported with the shipped 4,096-token BPE (not the byte
vocabulary), its EOS ``<|eos|>`` (id 1). Random weights rarely choose EOS, so the test makes
this model choose it: EOS's output row becomes a scaled copy of the row of a token the model
greedily emits a few steps in, so EOS wins where that token would have. The reference is an
independent single process: llama-cpp-python's high-level ``Llama`` on the same file, its
tokenizer, greedy sampling until the file's EOS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llamacpp_support import require_llama_cpp

require_llama_cpp()

from pdd_core.agent.supervisor.plane import DataPlane  # noqa: E402
from pdd_core.engine.gguf_export import BPE_VOCAB_SIZE, export_model  # noqa: E402
from pdd_core.engine.tiny import TinyConfig, TinyTransformer  # noqa: E402
from pdd_core.engine.tokenizer import EOS, bpe  # noqa: E402
from tests.system.conftest import ROOT, post, start_plane  # noqa: E402

pytestmark = pytest.mark.system
TOPOLOGY = ROOT / "fixtures" / "dataplane" / "llamacpp.json"
PROMPT = "The gateway tokenizes this café prompt with the model's own vocabulary"
MAX_TOKENS = 24
STOP_AFTER = 6  # the model's greedy output reaches EOS at about this step


def bpe_model_with_eos() -> TinyTransformer:
    model = TinyTransformer(TinyConfig(vocab_size=BPE_VOCAB_SIZE))
    greedy = model.generate(bpe().encode(PROMPT), STOP_AFTER + 1)
    target = greedy[STOP_AFTER]
    assert target not in greedy[:STOP_AFTER]
    model.lm_head[:, bpe().eos] = model.lm_head[:, target] * 1.25
    return model


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_model(
        tmp_path_factory.mktemp("gguf") / "tiny-bpe.gguf", bpe_model_with_eos(), vocab="bpe"
    )


@pytest.fixture(scope="module")
def reference(gguf: Path) -> tuple[list[int], str]:
    """Greedy tokens (ending with EOS) and their text from one llama.cpp process."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=512, n_threads=1, verbose=False)
    prompt = llm.tokenize(PROMPT.encode(), add_bos=True, special=False)
    out: list[int] = []
    for token in llm.generate(prompt, top_k=1, temp=0.0):
        out.append(int(token))
        if token == llm.token_eos() or len(out) == MAX_TOKENS:
            break
    return out, llm.detokenize(out).decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def bpe_plane(tmp_path_factory: pytest.TempPathFactory, gguf: Path) -> Iterator[DataPlane]:
    engine = json.loads(TOPOLOGY.read_text())["engine"]
    engine["llamacpp"] = dict(engine["llamacpp"], gguf=str(gguf), gguf_source="")
    plane = start_plane(tmp_path_factory.mktemp("llamacpp-bpe"), TOPOLOGY, engine=engine)
    yield plane
    plane.stop()


def test_the_reference_stops_at_the_files_eos_not_the_byte_vocabularys(
    reference: tuple[list[int], str],
) -> None:
    tokens, text = reference
    assert bpe().eos != EOS
    assert tokens[-1] == bpe().eos
    assert len(tokens) < MAX_TOKENS
    assert EOS not in tokens[:-1]
    assert text == bpe().decode(tokens)  # llama.cpp's vocabulary is the shipped BPE


@pytest.mark.parametrize(("pipeline", "mode"), [("P-MD", ""), ("P-RLD-MD", "extend-decode")])
def test_the_openai_client_gets_the_single_process_text_and_ids(
    bpe_plane: DataPlane, reference: tuple[list[int], str], pipeline: str, mode: str
) -> None:
    import openai

    client = openai.OpenAI(base_url=bpe_plane.gateway_url + "/v1", api_key=bpe_plane.api_key)
    extra = {"return_token_ids": True, "pdd": {"pipeline": pipeline, "handoff_mode": mode}}
    response = client.completions.create(
        model="tiny-test", prompt=PROMPT, max_tokens=MAX_TOKENS, extra_body=extra, timeout=60
    )

    tokens, text = reference
    choice = response.choices[0]
    assert (choice.model_extra or {})["token_ids"] == tokens
    assert choice.text == text
    assert choice.finish_reason == "stop"
    assert response.usage is not None
    assert response.usage.completion_tokens == len(tokens)
    assert response.usage.prompt_tokens == len(bpe().encode(PROMPT))


def test_a_stream_carries_the_same_text_and_ids(
    bpe_plane: DataPlane, reference: tuple[list[int], str]
) -> None:
    status, _, events = post(
        bpe_plane,
        "/v1/completions",
        {"prompt": PROMPT, "max_tokens": MAX_TOKENS, "stream": True, "return_token_ids": True},
        timeout=60,
    )

    assert status == 200
    chunks = [c for e in events if e != "[DONE]" for c in e["choices"]]
    tokens, text = reference
    assert [t for c in chunks for t in c.get("token_ids", [])] == tokens
    assert "".join(c["text"] for c in chunks) == text
    assert chunks[-1]["finish_reason"] == "stop"
