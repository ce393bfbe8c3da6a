"""``pdd trace stats|generate``: what a workload looks like, and a synthetic agentic one.

``stats`` is how an operator checks a trace before simulating or planning with it (how many
requests, how long, how much of the input a prefix cache would save); ``generate`` writes the
agentic workload of DOMAIN.md section 3 that the public traces lack.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

# Heavy modules (numpy via pdd_core.workload) are imported inside the verbs: building the parser
# must stay cheap for every other verb.


def register(subparsers: Any) -> None:
    """Add ``pdd trace stats`` and ``pdd trace generate`` to the command line."""
    parser = subparsers.add_parser("trace", help="inspect or generate workload traces")
    verbs = parser.add_subparsers(dest="trace_verb", metavar="VERB", required=True)

    stats = verbs.add_parser(
        "stats",
        help="request sizes, arrival rate and prefix-hit rates of a trace",
        description="Replay a trace through a radix prefix cache (infinite, or --cache-tokens "
        "with LRU eviction) and report sizes, rate, request- and token-weighted hit rates and "
        "the share of requests per hit band.",
    )
    stats.add_argument("file", help="trace file (Mooncake or Qwen-Bailian JSON lines, Azure CSV)")
    stats.add_argument("--format", choices=("mooncake", "qwen", "azure"), help="default: detect")
    stats.add_argument(
        "--block-size", type=_positive_int, help="tokens per hash (default 512 Mooncake, 16 Qwen)"
    )
    stats.add_argument(
        "--cache-tokens",
        type=_token_count,
        help="cache capacity in tokens, e.g. 2000000 or 2M (default: infinite)",
    )
    stats.add_argument("--skip-invalid", action="store_true", help="skip and count malformed lines")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.set_defaults(func=run_stats)

    gen = verbs.add_parser(
        "generate",
        help="write a synthetic agentic trace (Mooncake JSON lines)",
        description="Generate seeded agent sessions (shared system prompts, growing contexts, "
        "a singular slice) and write them as Mooncake JSON lines.",
    )
    gen.add_argument("--out", help="output file (default: standard output)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--sessions", type=_positive_int, help="agent runs (default 200)")
    gen.add_argument(
        "--session-rate", type=_positive_float, help="agent runs started per second (default 0.5)"
    )
    gen.add_argument("--turns", type=_positive_float, help="mean turns per run (default 30)")
    gen.add_argument(
        "--turn-gap", type=_positive_float, help="mean seconds between turns (default 6)"
    )
    gen.add_argument("--system-prompt-tokens", type=_positive_int, help="default 12000")
    gen.add_argument("--tool-tokens", type=_positive_float, help="median tool result (300)")
    gen.add_argument("--output-tokens", type=_positive_float, help="median output (600)")
    gen.add_argument("--singular-share", type=float, help="share of singular requests (0.035)")
    gen.add_argument("--block-size", type=_positive_int, help="tokens per hash (default 512)")
    gen.set_defaults(func=run_generate)


def run_stats(args: argparse.Namespace) -> int:
    """Print a trace's statistics as a table or JSON (exit code 0)."""
    from pdd_core.workload import read_trace, trace_stats

    trace = read_trace(
        args.file, args.format, skip_invalid=args.skip_invalid, block_size=args.block_size
    )
    stats = trace_stats(
        trace.requests,
        block_size=trace.block_size,
        cache_tokens=args.cache_tokens,
        skipped=trace.skipped,
    )
    if args.json:
        out = {"file": str(trace.path), "format": trace.format, **stats.to_dict()}
        print(json.dumps(_finite(out), indent=2))
        return 0
    blocks = f"{trace.block_size}-token blocks" if trace.block_size else "no prefix hashes"
    print(f"trace           {trace.path} ({trace.format}, {blocks})")
    print(
        f"requests        {stats.requests} over {stats.duration_s:.1f} s "
        f"= {stats.rate_per_s:.2f} req/s; {stats.skipped} malformed lines skipped"
    )
    print(f"{'':16}{'mean':>10}{'P50':>10}{'P90':>10}{'P99':>10}")
    for label, dist in (
        ("input tokens", stats.input_tokens),
        ("output tokens", stats.output_tokens),
    ):
        print(f"{label:16}{dist.mean:>10.0f}{dist.p50:>10.0f}{dist.p90:>10.0f}{dist.p99:>10.0f}")
    if stats.cache_tokens is None:
        cache = "infinite"
    else:
        cache = f"{stats.cache_tokens} tokens, LRU, {stats.evicted_blocks} blocks evicted"
    print(f"prefix cache    {cache}")
    print(
        f"hit rate        request-weighted {stats.request_weighted_hit:.1%}, "
        f"token-weighted {stats.token_weighted_hit:.1%}"
    )
    print(f"hit >= 95%      {stats.share_high_hit:.1%} of requests")
    print("hit band        share of requests")
    for label, share in stats.hit_bands:
        print(f"  {label:<13} {share:>6.1%}  {'#' * round(share * 40)}")
    return 0


def run_generate(args: argparse.Namespace) -> int:
    """Write a synthetic agentic trace to ``--out`` or standard output (exit code 0)."""
    from pdd_core.workload import AgenticWorkload, generate_agentic, write_mooncake

    overrides = {
        "sessions": args.sessions,
        "session_rate_per_s": args.session_rate,
        "turns_mean": args.turns,
        "turn_gap_s": args.turn_gap,
        "system_prompt_tokens": args.system_prompt_tokens,
        "tool_tokens_median": args.tool_tokens,
        "output_tokens_median": args.output_tokens,
        "singular_share": args.singular_share,
        "block_size": args.block_size,
    }
    params = AgenticWorkload(**{k: v for k, v in overrides.items() if v is not None})
    requests = generate_agentic(params, seed=args.seed)
    if args.out is None:
        write_mooncake(requests, sys.stdout)
        return 0
    with open(args.out, "w", encoding="utf-8") as fh:
        count = write_mooncake(requests, fh)
    print(f"wrote {count} requests of {params.sessions} sessions to {args.out}", file=sys.stderr)
    return 0


def _finite(value: Any) -> Any:
    # JSON has no NaN; an empty trace's percentiles become null rather than invalid JSON.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _token_count(text: str) -> int:
    """Accept ``2000000``, ``2M``, ``500K`` or ``1.5G`` (capacities are easier to read so)."""
    scale = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}.get(text[-1:].upper(), 1)
    number = text[:-1] if scale > 1 else text
    try:
        value = round(float(number) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a token count such as 2M, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be non-negative, got {text!r}")
    return value
