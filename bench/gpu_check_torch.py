"""The GPU check's measurements (``bench/gpu_check.py``): one random-weight model on one device.

``Bench`` builds a ``transformers`` Llama from a config dict and times a prefill, a decode step,
an extend over a cached context and a KV host copy, each the median of some repeats after a
warm-up; ``gpu_check`` sets every figure beside the roofline. torch and transformers are passed
in (imported by the caller), so importing this module needs neither.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


class Bench:
    """One model on one device; every measurement returns seconds (median of repeats)."""

    def __init__(self, torch: Any, transformers: Any, config: dict[str, Any], device: str) -> None:
        self.torch, self.device = torch, device
        self.dtype = torch.bfloat16
        self.config = transformers.LlamaConfig(**config)
        self.config._attn_implementation = "sdpa"
        self.transformers = transformers
        previous = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)
        try:
            with torch.device(device):
                self.model = transformers.LlamaForCausalLM(self.config).eval()
        finally:
            torch.set_default_dtype(previous)
        self.params = sum(p.numel() for p in self.model.parameters())

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def timed(self, fn: Callable[[], object], repeats: int) -> float:
        """Median seconds of ``fn`` after one warm-up call."""
        fn()
        self.sync()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            self.sync()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    def ids(self, batch: int, length: int) -> Any:
        vocab = self.config.vocab_size
        return self.torch.randint(0, vocab, (batch, length), device=self.device)

    def static_cache(self, batch: int, max_len: int, filled: int) -> Any:
        """A preallocated cache whose first ``filled`` positions hold random KV.

        Random KV costs attention exactly what real KV does and avoids a long prefill per cell.
        """
        cache_cls = self.transformers.StaticCache
        try:
            cache = cache_cls(config=self.config, max_cache_len=max_len)
        except TypeError:  # transformers < 4.56 allocates eagerly and needs the batch
            cache = cache_cls(
                config=self.config,
                max_batch_size=batch,
                max_cache_len=max_len,
                device=self.device,
                dtype=self.dtype,
            )
        c = self.config
        shape = (batch, c.num_key_value_heads, filled, c.head_dim)
        position = self.torch.arange(filled, device=self.device)
        for layer in range(c.num_hidden_layers):
            keys = self.torch.randn(shape, device=self.device, dtype=self.dtype)
            values = self.torch.randn(shape, device=self.device, dtype=self.dtype)
            cache.update(keys, values, layer, {"cache_position": position})
        return cache

    def forward(self, ids: Any, cache: Any, start: int) -> Any:
        """One pass of ``ids`` at positions ``start..``; logits of the last position only."""
        positions = self.torch.arange(start, start + ids.shape[1], device=self.device)
        with self.torch.inference_mode():
            out = self.model.model(
                input_ids=ids,
                past_key_values=cache,
                use_cache=True,
                cache_position=positions,
                position_ids=positions.unsqueeze(0).expand(ids.shape[0], -1),
            )
            return self.model.lm_head(out.last_hidden_state[:, -1:])

    def prefill(self, length: int, repeats: int) -> float:
        ids = self.ids(1, length)
        return self.timed(lambda: self.forward(ids, self.transformers.DynamicCache(), 0), repeats)

    def kv_bytes_per_token(self, length: int) -> float:
        """Bytes of the KV tensors a prefill of ``length`` tokens leaves in a fresh cache."""
        cache = self.transformers.DynamicCache()
        self.forward(self.ids(1, length), cache, 0)
        return sum(t.numel() * t.element_size() for t in cache_tensors(cache)) / length

    def decode_step(self, batch: int, context: int, repeats: int) -> float:
        return self.over_context(batch, 1, context, repeats)

    def extend(self, tokens: int, context: int, repeats: int) -> float:
        return self.over_context(1, tokens, context, repeats)

    def over_context(self, batch: int, tokens: int, context: int, repeats: int) -> float:
        """A pass of ``tokens`` new tokens per sequence over ``context`` cached ones, rewound
        after each repeat so every one sees the same context."""
        cache = self.static_cache(batch, context + tokens, context)
        ids = self.ids(batch, tokens)

        def once() -> None:
            self.forward(ids, cache, context)
            rewind(cache, context)

        return self.timed(once, repeats)

    def kv_copy(self, tokens: int, repeats: int) -> tuple[float, float, int]:
        """Seconds to copy one sequence's KV device -> host and host -> device, and its bytes."""
        c = self.config
        shape = (c.num_hidden_layers, 2, c.num_key_value_heads, tokens, c.head_dim)
        device_kv = self.torch.randn(shape, device=self.device, dtype=self.dtype)
        pinned = self.device.startswith("cuda")
        host_kv = self.torch.empty(shape, dtype=self.dtype, pin_memory=pinned)
        export_s = self.timed(lambda: host_kv.copy_(device_kv, non_blocking=pinned), repeats)
        import_s = self.timed(lambda: device_kv.copy_(host_kv, non_blocking=pinned), repeats)
        return export_s, import_s, device_kv.numel() * device_kv.element_size()

    def free_bytes(self) -> int | None:
        if not self.device.startswith("cuda"):
            return None
        free, _total = self.torch.cuda.mem_get_info()
        return int(free)

    def close(self) -> None:
        del self.model
        if self.device.startswith("cuda"):
            self.torch.cuda.empty_cache()


def rewind(cache: Any, length: int) -> None:
    """Set a static cache's write position back to ``length``.

    transformers 5 appends at a per-layer counter; older versions write where ``cache_position``
    says and have no counter, so there is nothing to rewind.
    """
    for layer in getattr(cache, "layers", ()):
        counter = getattr(layer, "cumulative_length", None)
        if hasattr(counter, "fill_"):
            counter.fill_(length)
        elif isinstance(counter, int):
            layer.cumulative_length = length


def cache_tensors(cache: Any) -> list[Any]:
    """Key and value tensors of a transformers cache (layered API of 4.56+, or the older lists)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [t for layer in layers for t in (layer.keys, layer.values) if t is not None]
    return [*cache.key_cache, *cache.value_cache]
