"""Native-size replay of the Mooncake conversation trace through a live ``pdd up`` plane.

Starts the timed plane of ``fixtures/dataplane/timed.json`` (DeepSeek-V3 roofline timing,
BPE prompt lengths, a 25 Gbps line), replays the first N requests (default 300) of the
conversation trace at their native sizes (a 512-token block is 512 tokens; outputs as the
trace says) at their trace arrival times / --speed, and prints the client-side summary with
the goal beside each figure: 0 failures, and the share of P-RLD-MD tokens MD decoded.

    .venv/bin/python bench/bench_native_replay.py [--limit 300] [--speed 1]

The full trace is read from ../shared/data/ when present, else the 200-request sample in
fixtures/traces/ (then at most 200 requests are replayed).

The number of P instances comes from the physics, not from trial runs (``prefill_instances``):
each request's prefill is ``pdd_core.perf``'s time for the part of its prompt no earlier
request shared (the trace's block hashes; P caches hold 2M tokens each, more than these
requests' distinct prefixes), times the engine's ``time_scale``; requests are taken first come
first served by whichever P frees first, as the gateway's ``choose_instance`` does; the plane
gets the fewest P for which no request's queue wait plus prefill exceeds the TTFT the gateway
rejects above (``sla.ttft_p99_s x routing.reject_ttft_factor``). The gateway rejects on a
prediction: P instances fewer than that turn the trace's bursts into 429s.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pdd_core import perf
from pdd_core.agent.replay import TRACE_BLOCK, replay
from pdd_core.agent.supervisor import DataPlane
from pdd_core.specs import load_chips, load_models
from pdd_core.workload.readers import read_trace
from pdd_core.workload.request import Request

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"
SAMPLE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"


def prefill_seconds(requests: Sequence[Request], engine: dict[str, Any]) -> list[float]:
    """Each request's modelled prefill seconds over the prefix earlier requests computed."""
    model = load_models()[engine["model"]]
    chip = load_chips()[engine["chips"]["prefill"]]
    seen: set[tuple[int, ...]] = set()
    out = []
    for request in requests:
        hashes = tuple(request.block_hashes)
        shared = 0
        while shared < len(hashes) and hashes[: shared + 1] in seen:
            shared += 1
        seen.update(hashes[: i + 1] for i in range(len(hashes)))
        hit = min(shared * TRACE_BLOCK, request.input_tokens - 1)
        timing = perf.prefill_time(model, chip, request.input_tokens - hit, hit, engine["tp"])
        out.append(timing.seconds * engine["time_scale"])
    return out


def worst_ttft_s(requests: Sequence[Request], work: Sequence[float], instances: int) -> float:
    """The longest queue wait plus prefill when ``instances`` P take requests first come,
    first served, each going to the P that frees first."""
    free = [0.0] * instances
    worst = 0.0
    for request, seconds in zip(requests, work, strict=True):
        start = max(request.arrival_s, heapq.heappop(free))
        heapq.heappush(free, start + seconds)
        worst = max(worst, start + seconds - request.arrival_s)
    return worst


def prefill_instances(requests: Sequence[Request], topology: dict[str, Any]) -> tuple[int, str]:
    """The fewest P whose worst predicted TTFT stays within the gateway's rejection bound."""
    bound = topology["sla"]["ttft_p99_s"] * topology["routing"].get("reject_ttft_factor", 1.0)
    work = prefill_seconds(requests, topology["engine"])
    instances = 1
    while worst_ttft_s(requests, work, instances) > bound:
        instances += 1
    fewer = (
        f"; {instances - 1} would give {worst_ttft_s(requests, work, instances - 1):.1f} s"
        if instances > 1
        else ""
    )
    why = (
        f"{instances} P: worst queue + prefill {worst_ttft_s(requests, work, instances):.1f} s "
        f"within the {bound:g} s rejection bound{fewer} (prefill work {sum(work):.0f} s over "
        f"{requests[-1].arrival_s - requests[0].arrival_s:.0f} s of arrivals)"
    )
    return instances, why


def sized(topology_path: Path, requests: Sequence[Request], run_dir: Path) -> tuple[Path, str]:
    """The topology with as many P agents as ``prefill_instances`` says, written to run_dir."""
    raw = json.loads(topology_path.read_text())
    count, why = prefill_instances(requests, raw)
    others = [a for a in raw["agents"] if a["role"] != "prefill"]
    site = next(a["site"] for a in raw["agents"] if a["role"] == "prefill")
    prefills = [{"id": f"p-{i}", "role": "prefill", "site": site} for i in range(count)]
    raw["agents"] = others[:1] + prefills + others[1:]
    path = run_dir / "topology.json"
    path.write_text(json.dumps(raw, indent=2))
    return path, why


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--topology", default=str(ROOT / "fixtures/dataplane/timed.json"))
    args = parser.parse_args()
    trace = read_trace(FULL if FULL.exists() else SAMPLE)
    requests = list(trace.requests[: args.limit])
    run_dir = Path(tempfile.mkdtemp(prefix="bench-native-"))
    topology, why = sized(Path(args.topology), requests, run_dir)
    print(f"sizing: {why}", flush=True)
    plane = DataPlane(topology, run_dir / "run")
    plane.start(timeout_s=120)
    try:
        began = time.perf_counter()
        summary = asyncio.run(
            replay(
                requests, gateway=plane.gateway_url, api_key=plane.api_key,
                model=plane.config.model, speed=args.speed, block_tokens=512,
                output_scale=1.0, max_output=0, timeout_s=600,
            )
        )  # fmt: skip
        wall = time.perf_counter() - began
    finally:
        plane.stop()
    prompt = sum(r.input_tokens for r in requests)
    print(
        f"trace: {trace.path.name}, {len(requests)} requests, {prompt} prompt tokens "
        f"(mean {prompt / len(requests):.0f}), speed {args.speed:g}, wall {wall:.1f} s"
    )
    print(summary.table())
    print()
    print(f"{'figure':<34}{'measured':>12}{'goal':>10}")
    print(f"{'failed requests':<34}{summary.failures:>12}{0:>10}")
    print(f"{'MD share of P-RLD-MD tokens':<34}{summary.md_share:>12.1%}{'> 50%':>10}")
    print(f"host load average (1, 5, 15 min) at the end: {os.getloadavg()}: the agents are")
    print("Python processes sharing this host's CPUs; a loaded host drains P queues late")
    print(f"logs and journals: {run_dir}")


if __name__ == "__main__":
    main()
