"""``PddBlockConnector``: vLLM's KV in and out of PDD blocks (a v1 KV connector).

vLLM loads this class by path (``kv_transfer_config = {"kv_connector": "PddBlockConnector",
"kv_connector_module_path": "pdd_core.engine.vllm.connector", "kv_role": ...,
"kv_connector_extra_config": {"store_dir": ...}}``) and creates it twice: once beside the
scheduler, once beside each worker. They talk only through ``PddConnectorMetadata``.

Scheduler side:

- ``get_num_new_matched_tokens``: the PDD chain hashes of the prompt's full blocks (the last
  prompt token excluded: vLLM must compute at least one token) are looked up in the store; the
  leading run present beyond what vLLM's own prefix cache holds is an external hit.
- ``update_state_after_alloc``: pairs each hit block with the vLLM block id allocated for it.
- ``build_connector_meta``: hands the worker this step's loads, and (producer roles) the saves
  of every request whose prompt finishes computing in this step: all its blocks, the trailing
  partial one included, exactly the blocks ``Engine.export_blocks`` hands to the transport.
- ``request_finished``: forgets the request; saves are written before the step returns, so vLLM
  may free the blocks at once.

Worker side:

- ``register_kv_caches``: the per-layer paged caches, ``(blocks, 2, block_size, kv_heads x
  head_dim)`` (vLLM's standardized per-layer view).
- ``start_load_kv`` reads the step's blocks from the store and writes every layer's slice into
  the paged caches before the forward pass; ``wait_for_layer_load`` then has nothing left to
  wait for. A missing or malformed block is reported through ``get_block_ids_with_load_errors``
  so vLLM recomputes it instead of attending over garbage.
- ``save_kv_layer`` copies each layer's slice of the blocks to save as the layer completes;
  ``wait_for_save`` joins the layers and writes one store file per block.
- ``get_finished``: transfers are synchronous, so no request is ever pending.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from pdd_core.engine.protocol import block_hashes
from pdd_core.engine.vllm.store import BlockStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BlockMove:
    """One block between vLLM's cache (``block_id``) and the store (``block_hash``)."""

    block_id: int
    block_hash: int
    tokens: int


@dataclass
class PddConnectorMetadata(KVConnectorMetadata):  # type: ignore[misc,unused-ignore]
    """What the scheduler tells the workers for one step: blocks to load and to save."""

    loads: list[BlockMove] = field(default_factory=list)
    saves: list[BlockMove] = field(default_factory=list)


@dataclass
class _Prompt:
    """A request the producer side will save once its whole prompt is computed."""

    tokens: list[int]
    block_ids: list[int]


def prompt_moves(tokens: list[int], block_ids: list[int], block_size: int) -> list[BlockMove]:
    """The saves of a computed prompt: every block, the trailing partial one included."""
    hashes = block_hashes(tokens, block_size, partial=True)
    return [
        BlockMove(block_ids[i], h, min(block_size, len(tokens) - i * block_size))
        for i, h in enumerate(hashes)
    ]


class PddBlockConnector(KVConnectorBase_V1):  # type: ignore[misc,unused-ignore]
    """Moves vLLM's paged KV to and from a ``BlockStore`` (see the module docstring)."""

    def __init__(
        self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None
    ) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        transfer = vllm_config.kv_transfer_config
        store_dir = transfer.get_from_extra_config("store_dir", None)
        if not store_dir:
            raise ValueError("kv_connector_extra_config.store_dir: the block store directory")
        capacity = transfer.get_from_extra_config("store_capacity_bytes", None)
        self.store = BlockStore(store_dir, int(capacity) if capacity else None)
        self.block_size: int = vllm_config.cache_config.block_size
        self.saves = bool(transfer.is_kv_producer)
        self.loads = bool(transfer.is_kv_consumer)
        # Scheduler side.
        self._matched: dict[str, tuple[int, list[int]]] = {}  # rid -> (first block, hashes)
        self._pending_loads: list[BlockMove] = []
        self._prompts: dict[str, _Prompt] = {}
        # Worker side.
        self._layers: dict[str, int] = {}
        self._caches: list[torch.Tensor] = []
        self._staged: dict[int, list[torch.Tensor | None]] = {}
        self._load_errors: set[int] = set()

    # --- scheduler side --------------------------------------------------------------------

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        if not self.loads:
            return 0, False
        tokens = list(request.prompt_token_ids or [])
        hashes = block_hashes(tokens[: max(len(tokens) - 1, 0)], self.block_size)
        held = self.store.leading(hashes)
        first = num_computed_tokens // self.block_size
        if held <= first:
            return 0, False
        self._matched[request.request_id] = (first, hashes[first:held])
        return held * self.block_size - num_computed_tokens, False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        matched = self._matched.pop(request.request_id, None)
        if num_external_tokens <= 0 or matched is None:
            return
        first, hashes = matched
        block_ids = blocks.get_block_ids()[0]
        self._pending_loads += [
            BlockMove(block_ids[first + i], h, self.block_size) for i, h in enumerate(hashes)
        ]

    def build_connector_meta(self, scheduler_output: Any) -> PddConnectorMetadata:
        meta = PddConnectorMetadata(loads=self._pending_loads)
        self._pending_loads = []
        if not self.saves:
            return meta
        scheduled = scheduler_output.num_scheduled_tokens
        for new in scheduler_output.scheduled_new_reqs:
            tokens = list(new.prompt_token_ids or [])
            self._prompts[new.req_id] = _Prompt(tokens, list(new.block_ids[0]))
            self._save_if_done(meta, new.req_id, new.num_computed_tokens + scheduled[new.req_id])
        cached = scheduler_output.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            pending = self._prompts.get(rid)
            if pending is None:
                continue
            new_ids = cached.new_block_ids[i]
            if new_ids is not None:
                resumed = rid in cached.resumed_req_ids
                pending.block_ids = [*([] if resumed else pending.block_ids), *new_ids[0]]
            self._save_if_done(meta, rid, cached.num_computed_tokens[i] + scheduled[rid])
        return meta

    def _save_if_done(self, meta: PddConnectorMetadata, rid: str, computed: int) -> None:
        prompt = self._prompts[rid]
        if computed < len(prompt.tokens) or not prompt.tokens:
            return
        del self._prompts[rid]
        moves = prompt_moves(prompt.tokens, prompt.block_ids, self.block_size)
        meta.saves += [m for m in moves if not self.store.has(m.block_hash)]

    def request_finished(self, request: Any, block_ids: list[int]) -> tuple[bool, None]:
        self._prompts.pop(request.request_id, None)
        self._matched.pop(request.request_id, None)
        return False, None

    # --- worker side -----------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        for index, (name, cache) in enumerate(kv_caches.items()):
            if cache.dim() != 4 or cache.shape[1] != 2 or cache.shape[2] != self.block_size:
                raise ValueError(
                    f"{name}: paged cache {tuple(cache.shape)} is not (blocks, 2, "
                    f"{self.block_size}, kv_heads x head_dim)"
                )
            self._layers[name] = index
            self._caches.append(cache)

    def _block_shape(self, tokens: int) -> tuple[int, int, int, int]:
        first = self._caches[0]
        return (len(self._caches), 2, tokens, int(first.shape[3]))

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        for move in meta.loads:
            data = self.store.read(move.block_hash)
            first = self._caches[0]
            shape = self._block_shape(move.tokens)
            expected = shape[0] * shape[1] * shape[2] * shape[3] * first.element_size()
            if data is None or len(data) != expected:
                self._load_errors.add(move.block_id)
                continue
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            block = raw.view(first.dtype).view(shape).to(first.device)
            for layer, cache in enumerate(self._caches):
                cache[move.block_id, :, : move.tokens] = block[layer]

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # start_load_kv wrote every layer before the forward pass began

    def save_kv_layer(
        self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any, **kwargs: Any
    ) -> None:
        if not self.has_connector_metadata():
            return
        layer = self._layers.get(layer_name)
        if layer is None:
            return
        for move in self._get_connector_metadata().saves:
            staged = self._staged.setdefault(move.block_hash, [None] * len(self._caches))
            staged[layer] = kv_layer[move.block_id, :, : move.tokens].to("cpu", copy=True)

    def wait_for_save(self) -> None:
        staged, self._staged = self._staged, {}
        for block_hash, layers in staged.items():
            if any(layer is None for layer in layers):
                continue  # a layer never ran this step: save nothing rather than a torn block
            block = torch.stack([layer for layer in layers if layer is not None]).contiguous()
            try:
                self.store.write(block_hash, block.view(torch.uint8).numpy().tobytes())
            except OSError as exc:
                # A full or vanished store must not take the engine down: the block is simply
                # missing, and the agent's export of it fails that one request.
                log.warning("block %016x: not saved: %s", block_hash, exc)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors
