"""Native-size replay of the Mooncake conversation trace through a live ``pdd up`` plane.

Starts the timed plane of ``fixtures/dataplane/timed.json`` (DeepSeek-V3 roofline timing,
BPE prompt lengths, a 25 Gbps line), replays the first N requests (default 300) of the
conversation trace at their native sizes (a 512-token block is 512 tokens; outputs as the
trace says) at their trace arrival times / --speed, and prints the client-side summary with
the goal beside each figure: 0 failures, and the share of P-RLD-MD tokens MD decoded.

    .venv/bin/python bench/bench_native_replay.py [--limit 300] [--speed 1]

The full trace is read from ../shared/data/ when present, else the 200-request sample in
fixtures/traces/ (then at most 200 requests are replayed).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from pdd_core.agent.replay import replay
from pdd_core.agent.supervisor import DataPlane
from pdd_core.workload.readers import read_trace

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"
SAMPLE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--topology", default=str(ROOT / "fixtures/dataplane/timed.json"))
    args = parser.parse_args()
    trace = read_trace(FULL if FULL.exists() else SAMPLE)
    requests = list(trace.requests[: args.limit])
    run_dir = Path(tempfile.mkdtemp(prefix="bench-native-"))
    plane = DataPlane(args.topology, run_dir)
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
    print(f"logs and journals: {run_dir}")


if __name__ == "__main__":
    main()
