"""Native-size replay of the Mooncake conversation trace through a live ``pdd up`` plane.

Starts the timed plane of ``fixtures/dataplane/timed.json`` (DeepSeek-V3 roofline timing,
BPE prompt lengths, a 25 Gbps line), replays the first N requests (default 300) of the
conversation trace at their native sizes (a 512-token block is 512 tokens; outputs as the
trace says) at their trace arrival times / --speed, and prints the client-side summary with
the goal beside each figure: 0 failures, and the share of P-RLD-MD tokens MD decoded.

    .venv/bin/python bench/bench_native_replay.py [--limit 300] [--speed 1] [--trace PATH]

The full trace is read from ../shared/data/ when present (``--trace`` names it from a
worktree, whose parent has no shared/), else the 200-request sample in fixtures/traces/ (then
at most 200 requests are replayed).

The number of P instances comes from the physics, not from trial runs (``prefill_instances``):
each request's prefill is the gateway's own prediction (``engines.Predictor.prefill_s``: the
timed engine's roofline on its configured shape, tp x pp, times ``time_scale``) for the part of
its prompt no earlier request shared (the trace's block hashes; this assumes the P that takes
a request holds the prefixes earlier requests computed, exact with one P and LRU caches that
keep a conversation's recent turns); each request goes to the P the gateway predicts would
finish it soonest, where P runs batches of up to ``limits.prefill_batch`` waiting requests
first come, first served, and the gateway holds each request's prefill until its batch ends
(``PrefillQueue``: the whole batch in flight counts); the plane gets the fewest P for which no
request's predicted queue plus prefill exceeds the TTFT the gateway rejects above
(``sla.ttft_p99_s x routing.reject_ttft_factor``). The gateway rejects on a prediction: P
instances fewer than that turn the trace's bursts into 429s, and P agents slower than their
modelled passes (a starved host, or host work that holds P's worker between passes) make the
real queue outgrow the prediction.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pdd_core.agent.config import config_from_dict
from pdd_core.agent.engines import Predictor
from pdd_core.agent.replay import TRACE_BLOCK, replay
from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.metrics import percentile
from pdd_core.workload.readers import read_trace
from pdd_core.workload.request import Request

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"
SAMPLE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"


def prefill_seconds(requests: Sequence[Request], predictor: Predictor) -> list[float]:
    """Each request's prefill seconds over the prefix earlier requests computed, as the
    gateway predicts them (``Predictor.prefill_s``: the timed engine's own shape and scale)."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for request in requests:
        hashes = tuple(request.block_hashes)
        shared = 0
        while shared < len(hashes) and hashes[: shared + 1] in seen:
            shared += 1
        seen.update(hashes[: i + 1] for i in range(len(hashes)))
        hit = min(shared * TRACE_BLOCK, request.input_tokens - 1)
        out.append(predictor.prefill_s(request.input_tokens - hit, hit))
    return out


class PrefillQueue:
    """One P as the P agent runs it and as the gateway sees it: requests wait first come,
    first served; a free P takes up to ``batch_limit`` of them into one batch that lasts the
    sum of their passes; the gateway holds each request's predicted prefill until its batch
    ends (``PREFILLED``), so the whole batch in flight counts in the queue it predicts."""

    def __init__(self, batch_limit: int) -> None:
        self.batch_limit = batch_limit
        self.batch_end = 0.0
        self.batch_s = 0.0
        self.waiting: deque[float] = deque()

    def reserved_s(self, now: float) -> float:
        """The prefill seconds the gateway holds against this P at ``now``."""
        while self.waiting and self.batch_end <= now:
            count = min(self.batch_limit, len(self.waiting))
            taken = [self.waiting.popleft() for _ in range(count)]
            self.batch_s = sum(taken)
            self.batch_end += self.batch_s  # the next batch starts as the last one ends
        return (self.batch_s if self.batch_end > now else 0.0) + sum(self.waiting)

    def add(self, now: float, seconds: float) -> None:
        """A request routed here at ``now`` (after ``reserved_s(now)``)."""
        if self.batch_end <= now and not self.waiting:
            self.batch_end, self.batch_s = now + seconds, seconds
        else:
            self.waiting.append(seconds)


def worst_ttft_s(
    requests: Sequence[Request], work: Sequence[float], instances: int, batch_limit: int
) -> float:
    """The highest TTFT the gateway predicts (P queue + prefill, ``predict_state``'s terms)
    when ``instances`` P serve the requests, each going to the P that would finish it soonest
    (``estimates.choose_prefill``; the same prefill everywhere, ties to the lower index)."""
    queues = [PrefillQueue(batch_limit) for _ in range(instances)]
    worst = 0.0
    for request, seconds in zip(requests, work, strict=True):
        now = request.arrival_s
        held = [queue.reserved_s(now) for queue in queues]
        chosen = held.index(min(held))
        worst = max(worst, held[chosen] + seconds)
        queues[chosen].add(now, seconds)
    return worst


def prefill_instances(requests: Sequence[Request], topology: dict[str, Any]) -> tuple[int, str]:
    """The fewest P whose worst predicted TTFT stays within the gateway's rejection bound."""
    config = config_from_dict(topology)
    bound = config.sla.ttft_p99_s * config.routing.reject_ttft_factor
    work = prefill_seconds(requests, Predictor(config))
    batch = config.limits.prefill_batch
    instances = 1
    while worst_ttft_s(requests, work, instances, batch) > bound:
        instances += 1
    fewer = (
        f"; {instances - 1} would give {worst_ttft_s(requests, work, instances - 1, batch):.1f} s"
        if instances > 1
        else ""
    )
    why = (
        f"{instances} P: worst predicted queue + prefill "
        f"{worst_ttft_s(requests, work, instances, batch):.1f} s within the {bound:g} s "
        f"rejection bound{fewer} (prefill work {sum(work):.0f} s over "
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


def load_average() -> str:
    """The host's load average now, rounded (1, 5 and 15 minutes)."""
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--topology", default=str(ROOT / "fixtures/dataplane/timed.json"))
    parser.add_argument("--trace", default=str(FULL if FULL.exists() else SAMPLE))
    args = parser.parse_args()
    trace = read_trace(Path(args.trace))
    requests = list(trace.requests[: args.limit])
    run_dir = Path(tempfile.mkdtemp(prefix="bench-native-"))
    topology, why = sized(Path(args.topology), requests, run_dir)
    print(f"sizing: {why}", flush=True)
    load_before = load_average()
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
    rejected = sum(1 for r in summary.results if r.status == 429)
    mid_stream = sum(1 for r in summary.results if not r.ok and r.mid_stream)
    ttft = [r.ttft_s for r in summary.results if r.ok and r.ttft_s is not None]
    target = plane.config.sla.ttft_p99_s
    print(f"{'figure':<38}{'measured':>12}{'goal':>10}")
    print(f"{'failed requests':<38}{summary.failures:>12}{0:>10}")
    print(f"{'  of which 429 before any token':<38}{rejected:>12}{0:>10}")
    print(f"{'  of which failed mid-stream':<38}{mid_stream:>12}{0:>10}")
    print(f"{'TTFT p99 of the served (s)':<38}{percentile(ttft, 99) if ttft else 0:>12.1f}"
          f"{f'<= {target:g}':>10}")  # fmt: skip
    print(f"{'MD share of P-RLD-MD tokens':<38}{summary.md_share:>12.1%}{'> 50%':>10}")
    print(f"host load average (1, 5, 15 min): {load_before} at the start, {load_average()} at")
    print("the end: the agents are Python processes sharing this host's CPUs; a loaded host")
    print("runs them late, and P's queue drains later than the gateway predicts")
    print(f"logs and journals: {run_dir}")


if __name__ == "__main__":
    main()
