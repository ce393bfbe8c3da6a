"""Routing decision time per request: the gateway's router versus round-robin, side by side.

Replays the Mooncake sample's prompts (built as ``pdd replay`` builds them) through a gateway's
``route`` with a live cache view that grows as the requests are served (every routed prompt's
blocks enter its P and MD views), and times per request: (a) round-robin over the P and MD
instances, the trivial baseline; (b) ``pdd_core.routing`` alone (choose_instance x 2,
choose_pipeline, predict_rejection) on precomputed features; (c) the gateway's whole decision:
hashing the prompt, looking up the hit in every instance's view, predicting prefill and
transfer, and the routing functions. No sockets: the agents are reported reachable.

    .venv/bin/python bench/bench_routing.py [--requests 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
from pathlib import Path

from pdd_core.agent.config import load_config
from pdd_core.agent.gateway import Gateway
from pdd_core.agent.protocol import FrameType, control
from pdd_core.agent.replay import build_prompt
from pdd_core.agent.supervisor import resolve
from pdd_core.engine.protocol import block_hashes
from pdd_core.engine.tokenizer import ByteTokenizer
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


async def main(args: argparse.Namespace) -> None:
    config, _ = resolve(load_config(ROOT / args.config), Path(tempfile.mkdtemp()))
    gateway = Gateway(config, "gateway")
    gateway.up = lambda role: [a.id for a in config.of_role(role)]  # type: ignore[method-assign]
    trace = read_trace(ROOT / "fixtures/traces/mooncake_conversation_sample.jsonl")
    tokenizer = ByteTokenizer()
    prompts = [tokenizer.encode(build_prompt(r, 16)) for r in trace.requests[: args.requests]]
    outputs = [max(1, r.output_tokens // 32) for r in trace.requests[: args.requests]]

    routes = []
    for prompt, out in zip(prompts, outputs, strict=True):  # warm the views as serving would
        route = gateway.route(prompt, out, {})
        gateway.release(route)
        routes.append(route)
        hashes = block_hashes(prompt, config.engine.block_size)
        for agent in (route.prefill, route.main):
            if agent:
                body = {"added": hashes}
                await gateway._on_frame(agent, control(FrameType.CACHE_EVENT, "", body))

    instances = [a.id for a in config.agents if a.role in ("prefill", "main")]
    cycle = itertools.cycle(instances)
    baseline = timed(lambda _: (next(cycle), next(cycle)), list(range(len(prompts))), args.repeat)

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

    pure = timed(decide, features, args.repeat)

    def full(item):  # type: ignore[no-untyped-def]
        gateway.release(gateway.route(item[0], item[1], {}))

    whole = timed(full, list(zip(prompts, outputs, strict=True)), args.repeat)

    tokens = sum(len(p) for p in prompts) / len(prompts)
    print(
        f"{len(prompts)} Mooncake requests, mean prompt {tokens:.0f} tokens "
        f"({tokens / config.engine.block_size:.0f} blocks), 2 P + 2 MD views, "
        f"best of {args.repeat}"
    )
    print(f"{'decision':<44}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}{'x rr':>8}")
    base_mean = sum(baseline) / len(baseline)
    for name, values in (
        ("round-robin (baseline)", baseline),
        ("pdd_core.routing functions only", pure),
        ("gateway route (hash + view lookup + route)", whole),
    ):
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
    asyncio.run(main(parser.parse_args()))
