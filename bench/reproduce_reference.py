"""Print the comparison table of the reference scenario (DOMAIN.md section 8).

Runs colocated, same-dc, naive-cross-dc and pdd on the same seeded agentic workload of
``fixtures/scenarios/pdd_reference.toml`` and prints ``pdd compare``'s table, then the workload's
measured shape (so the inputs can be checked against section 8) and each policy's pipeline mix.

    .venv/bin/python bench/reproduce_reference.py [--scenario FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdd_core.cli.simulate import _clean, compare_scenario, compare_table  # noqa: E402

DEFAULT_SCENARIO = ROOT / "fixtures" / "scenarios" / "pdd_reference.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ran = compare_scenario(str(args.scenario))
    results = ran["results"]
    if args.json:
        rows = {p: _clean(r.summary.compare_dict()) for p, r in results.items()}
        print(json.dumps({"policies": rows}, indent=2))
        return 0
    print(compare_table({p: r.summary.compare_dict() for p, r in results.items()}))
    pdd = results["pdd"]
    records = pdd.records
    duration = max(r.arrival_s for r in records) - min(r.arrival_s for r in records)
    print()
    print(
        f"workload: {len(records)} requests over {duration:.0f} s "
        f"({len(records) / duration:.2f} req/s), mean input "
        f"{statistics.fmean(r.input_tokens for r in records):.0f}, mean output "
        f"{statistics.fmean(r.output_tokens for r in records if not r.rejected):.0f} tokens"
    )
    s = pdd.summary
    print(
        f"pdd: hit at P {s.hit_request_weighted:.3f} request-weighted / "
        f"{s.hit_token_weighted:.3f} token-weighted, hit at MD (DRC) {s.md_hit_token_weighted:.3f}"
    )
    for policy, result in results.items():
        mix = ", ".join(f"{k} {v:.1%}" for k, v in result.summary.pipeline_mix.items())
        util = ", ".join(f"{k} {v:.0%}" for k, v in result.summary.utilisation.items())
        print(f"{policy:<15} pipelines: {mix}; utilisation: {util}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
