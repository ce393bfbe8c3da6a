"""Routing decision time per request: the gateway's router versus round-robin, side by side.

Replays the Mooncake sample's prompts (built as ``pdd replay`` builds them, at native size in
the data plane's BPE, or all cut/extended to ``--prompt-tokens``) through a gateway's ``route``
with a live cache view that grows as the requests are served (every routed prompt's blocks
enter its P and MD views), and times per request: (a) round-robin over the P and MD
instances, the trivial baseline; (b) ``pdd_core.routing`` alone on precomputed features;
(c) the gateway's decision: view lookups, predictions (P wait, MD wait, WAN time against the
flows in flight, TTFT) and the routing functions, on the block hashes the API computed when it
took the prompt in (in the tokenizer's thread); (d) the hashing itself, before (one
``chain_hash`` per block, token by token) and now (one serialization, a slice per block).

    .venv/bin/python bench/bench_routing.py [--requests 200] [--repeat 5] [--prompt-tokens 32768]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from pdd_core.agent.config import load_config
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.gateway.types import Route
from pdd_core.agent.protocol import FrameType, control
from pdd_core.agent.replay import build_prompt
from pdd_core.agent.supervisor.plane import resolve
from pdd_core.engine.protocol import ROOT_HASH, block_hashes, chain_hash
from pdd_core.engine.tokenizer import bpe
from pdd_core.metrics import percentile
from pdd_core.routing import (
    InstanceView,
    RouteFeatures,
    choose_instance,
    choose_pipeline,
    predict_rejection,
)
from pdd_core.workload.readers import read_trace

ROOT = Path(__file__).resolve().parents[1]


def timed(fn, items, repeat):  # type: ignore[no-untyped-def]
    """Per-item seconds, best of ``repeat`` passes for each item."""
    best = [float("inf")] * len(items)
    for _ in range(repeat):
        for i, item in enumerate(items):
            start = time.perf_counter_ns()
            fn(item)
            best[i] = min(best[i], (time.perf_counter_ns() - start) / 1e9)
    return best


async def served_routes(
    gateway: Gateway, prompts: list[list[int]], outputs: list[int], block_size: int
) -> list[Route]:
    """Route every prompt once, as serving would, growing the views as it goes: each routed
    prompt's blocks enter its P's and its MD's views."""
    routes = []
    for prompt, out in zip(prompts, outputs, strict=True):
        route = gateway.router.route(prompt, out, {})
        gateway.router.release(route)
        routes.append(route)
        hashes = block_hashes(prompt, block_size)
        for agent in (route.prefill, route.main):
            if agent:
                body = {"added": hashes}
                await gateway.on_frame(agent, control(FrameType.CACHE_EVENT, "", body))
    return routes


def time_decisions(
    gateway: Gateway,
    prompts: list[list[int]],
    outputs: list[int],
    routes: list[Route],
    *,
    repeat: int,
) -> dict[str, list[float]]:
    """Per-request seconds of each way to decide, and of each way to hash, by table row."""
    config = gateway.config
    size = config.engine.block_size
    instances = [a.id for a in config.agents if a.role in ("prefill", "main")]
    cycle = itertools.cycle(instances)
    baseline = timed(lambda _: (next(cycle), next(cycle)), list(range(len(prompts))), repeat)
    features = [
        (
            [InstanceView(0, r.hit_tokens_p, 0.0, r.prefill_s), InstanceView(1, 0, 0.0, 1.0)],
            [InstanceView(0, r.hit_tokens_md, 0.0, 0.01), InstanceView(1, 0, 0.0, 0.02)],
            RouteFeatures(len(p), r.hit_tokens_p, r.hit_tokens_md, o, 0.01),
        )
        for p, o, r in zip(prompts, outputs, routes, strict=True)
    ]

    def decide(item):  # type: ignore[no-untyped-def]
        p_views, md_views, feats = item
        choose_instance(p_views)
        choose_instance(md_views)
        choose_pipeline(feats, config.routing)
        predict_rejection(0.1, config.sla, config.routing)

    def full(item):  # type: ignore[no-untyped-def]
        gateway.router.release(gateway.router.route(item[0], item[1], {}, item[2]))

    def chained(prompt):  # type: ignore[no-untyped-def]
        parent = ROOT_HASH
        for start in range(0, len(prompt) - len(prompt) % size, size):
            parent = chain_hash(parent, prompt[start : start + size])

    hashes_of = [block_hashes(p, size) for p in prompts]
    return {
        "round-robin (baseline)": baseline,
        "pdd_core.routing functions only": timed(decide, features, repeat),
        "gateway decision (hashes given)": timed(
            full, list(zip(prompts, outputs, hashes_of, strict=True)), repeat
        ),
        "hashing, chain_hash per block (before)": timed(chained, prompts, 1),
        "hashing, one serialization (now)": timed(lambda p: block_hashes(p, size), prompts, repeat),
    }


async def main(args: argparse.Namespace) -> None:
    config, _ = resolve(load_config(ROOT / args.config), Path(tempfile.mkdtemp()))
    gateway = Gateway(config, "gateway")
    gateway.up = lambda role: [a.id for a in config.of_role(role)]  # type: ignore[method-assign]
    trace = read_trace(ROOT / "fixtures/traces/mooncake_conversation_sample.jsonl")
    chosen = trace.requests[: args.requests]
    if args.prompt_tokens:
        chosen = [replace(r, input_tokens=args.prompt_tokens) for r in chosen]
    prompts = [bpe().encode(build_prompt(r, 512)) for r in chosen]
    outputs = [r.output_tokens for r in chosen]
    routes = await served_routes(gateway, prompts, outputs, config.engine.block_size)
    rows = time_decisions(gateway, prompts, outputs, routes, repeat=args.repeat)

    tokens = sum(len(p) for p in prompts) / len(prompts)
    print(
        f"{len(prompts)} Mooncake requests, mean prompt {tokens:.0f} tokens "
        f"({tokens / config.engine.block_size:.0f} blocks), 2 P + 2 MD views, "
        f"best of {args.repeat}; goal: decision p99 <= 100 us on a 32K-token prompt"
    )
    print(f"{'decision':<44}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}{'x rr':>8}")
    baseline = rows["round-robin (baseline)"]
    base_mean = sum(baseline) / len(baseline)
    for name, values in rows.items():
        mean = sum(values) / len(values)
        print(f"{name:<44}{percentile(values, 50) * 1e6:>10.2f}"
              f"{percentile(values, 99) * 1e6:>10.2f}{mean * 1e6:>10.2f}"
              f"{mean / base_mean:>8.0f}")  # fmt: skip
    mix = {
        p: sum(1 for r in routes if r.pipeline.value == p) for p in ("P-MD", "P-RLD-MD", "P-RLD")
    }
    print("pipelines chosen: " + ", ".join(f"{k}={v}" for k, v in mix.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="fixtures/dataplane/timed.json")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=0, help="0: native trace sizes")
    asyncio.run(main(parser.parse_args()))
