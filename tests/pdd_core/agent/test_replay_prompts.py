"""``pdd replay`` prompts: native sizes in the data plane's BPE, shared blocks shared exactly."""

from __future__ import annotations

from pathlib import Path

from pdd_core.agent.replay import build_prompt
from pdd_core.engine.tokenizer import bpe
from pdd_core.workload.readers import read_trace

SAMPLE = Path(__file__).resolve().parents[3] / "fixtures/traces/mooncake_conversation_sample.jsonl"


def test_a_trace_request_is_exactly_its_input_length_in_tokens() -> None:
    requests = read_trace(SAMPLE).requests[:4]

    lengths = [len(bpe().encode(build_prompt(r, 512))) for r in requests]

    assert lengths == [r.input_tokens for r in requests]


def test_requests_sharing_hash_ids_share_those_blocks_token_for_token() -> None:
    first, second = read_trace(SAMPLE).requests[:2]
    shared = 0
    for a, b in zip(first.block_hashes, second.block_hashes, strict=False):
        if a != b:
            break
        shared += 1

    one, two = (bpe().encode(build_prompt(r, 512)) for r in (first, second))

    assert shared == 1
    assert one[:512] == two[:512]
    assert one[512:1024] != two[512:1024]


def test_a_scaled_replay_sends_block_tokens_per_trace_block() -> None:
    request = read_trace(SAMPLE).requests[0]

    tokens = bpe().encode(build_prompt(request, 16))

    assert len(tokens) == -(-request.input_tokens * 16 // 512)
