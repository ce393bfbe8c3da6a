"""``pdd replay``: replay a trace through a gateway as an OpenAI client and print its figures.

Prompts share text exactly where the trace's block-hash prefixes are shared (see
``pdd_core.agent.replay``); the summary gives client-side TTFT and TPOT percentiles, failures
and the mix of pipelines the gateway chose.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a trace against a gateway (OpenAI API) and print TTFT/TPOT percentiles",
        description="Send the trace's requests at their arrival times / --speed as streaming "
        "completions at native sizes: each trace block (512 tokens) becomes 512 BPE tokens of "
        "text fixed by its hash id and each output is the trace's. --block-tokens and "
        "--output-scale scale a trace down for a small demo.",
    )
    parser.add_argument("trace", metavar="TRACE")
    parser.add_argument("--gateway", required=True, help="gateway URL, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--api-key", help="API key (prefer PDD_API_KEY in the environment: ps shows argv)"
    )
    parser.add_argument("--speed", type=float, default=1.0, help="time compression factor")
    parser.add_argument("--limit", type=int, help="replay only the first N requests")
    parser.add_argument("--model", help="model name (default: the gateway's first model)")
    parser.add_argument(
        "--block-tokens", type=int, default=512, help="tokens per trace block (512: native)"
    )
    parser.add_argument(
        "--output-scale", type=float, default=1.0, help="trace output tokens per requested one"
    )
    parser.add_argument("--max-output", type=int, default=0, help="cap on max_tokens (0: none)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request bound (s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import os
    import urllib.request

    from pdd_core.agent.replay import replay
    from pdd_core.workload.readers import read_trace

    if args.speed <= 0:
        raise ValueError("--speed: must be positive")
    args.api_key = args.api_key or os.environ.get("PDD_API_KEY", "")
    if not args.api_key:
        print("pdd replay: an API key is needed (PDD_API_KEY or --api-key)")
        return 2
    trace = read_trace(args.trace)
    requests = list(trace.requests[: args.limit] if args.limit else trace.requests)
    model = args.model
    if model is None:
        request = urllib.request.Request(
            args.gateway.rstrip("/") + "/v1/models",
            headers={"Authorization": f"Bearer {args.api_key}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            model = json.loads(response.read())["data"][0]["id"]
    summary = asyncio.run(
        replay(
            requests,
            gateway=args.gateway,
            api_key=args.api_key,
            model=model,
            speed=args.speed,
            block_tokens=args.block_tokens,
            output_scale=args.output_scale,
            max_output=args.max_output,
            timeout_s=args.timeout,
        )
    )
    print(f"replayed {trace.path.name} ({trace.format}) at speed {args.speed:g}")
    print(summary.table())
    print(f"MD token share of P-RLD-MD: {summary.md_share:.1%}")
    return 1 if summary.failures else 0
