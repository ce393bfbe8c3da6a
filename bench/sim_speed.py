"""Simulated requests per second of each policy on a public trace (a benchmark, not a test).

Runs the Mooncake conversation trace (12k requests, about one hour) through the reference
scenario's topologies, one policy after another on one core, and prints wall time and simulated
requests per second side by side. The issue's goal is the ``pdd`` row within 10 s.

    .venv/bin/python bench/sim_speed.py [--trace FILE] [--scenario FILE] [--policies ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdd_core.scenario import load_scenario  # noqa: E402
from pdd_core.sim import POLICIES  # noqa: E402

DEFAULT_TRACE = ROOT.parent / "shared" / "data" / "mooncake_conversation_trace.jsonl"
DEFAULT_SCENARIO = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    parser.add_argument("--policies", nargs="+", default=[str(p) for p in POLICIES])
    args = parser.parse_args()
    if not args.trace.exists():
        print(f"trace not found: {args.trace}", file=sys.stderr)
        return 2
    scenario = load_scenario(args.scenario, trace=args.trace)
    started = time.perf_counter()
    requests = scenario.workload.requests()
    read_s = time.perf_counter() - started
    print(f"trace {args.trace.name}: {len(requests)} requests, read in {read_s:.2f} s")
    print(f"scenario {args.scenario.name}")
    print(f"{'policy':<16}{'wall s':>8}{'sim req/s':>12}{'served':>8}{'rejected':>10}")
    for policy in args.policies:
        started = time.perf_counter()
        result = scenario.run(policy, requests)
        wall = time.perf_counter() - started
        s = result.summary
        print(f"{policy:<16}{wall:>8.2f}{len(requests) / wall:>12.0f}{s.served:>8}{s.rejected:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
