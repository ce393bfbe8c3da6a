"""``bench_telemetry.py --profile``: the ingestion service called in-process (no HTTP), CPU per
1000 records by stage and the functions with the most own CPU time, one tree against another."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

from telemetry_server import PY

# The ingestion service called in-process (no HTTP): CPU of this process per 1000 records, and
# a cProfile (CPU time) of the same load. argv: the file holding ``records``
# (telemetry_server.py), records, batch size.
PROFILE = r"""
import cProfile, importlib.util, json, os, pstats, sys, time
sys.path.append(os.path.dirname(sys.argv[1]))  # telemetry_server.py imports proc_stat
spec = importlib.util.spec_from_file_location("bench_records", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from controlplane.telemetry.services import records_ingest
exec(bench.WORLD)
total, size = int(sys.argv[2]), int(sys.argv[3])
def work():
    return [json.loads(json.dumps(bench.records(size))) for _ in range(total // size)]
records_ingest(records=work()[0])
batches = work()
start = time.process_time()
for batch in batches:
    records_ingest(records=batch)
cpu = time.process_time() - start
batches = work()
profile = cProfile.Profile(time.process_time)  # CPU, as the total: waits on I/O are not
profile.enable()
for batch in batches:
    records_ingest(records=batch)
profile.disable()
functions = {}
for (path, _, name), (_, _, own, cumulative, _) in pstats.Stats(profile).stats.items():
    key = path.rsplit("/", 1)[-1].removesuffix(".py") + "." + name
    mine, cum = functions.get(key, (0.0, 0.0))
    functions[key] = (mine + own, max(cum, cumulative))
profiled = sum(own for own, _ in functions.values())
print(json.dumps({"cpu_ms_per_1000": cpu / total * 1e6, "profiled_s": profiled,
                  "functions": functions}))
"""
# The stages of ``records_ingest`` the profile table breaks out (either tree's names).
STAGES = (
    "validation.records_parse", "services._check_bounds", "services._check_tenants",
    "partitions.partitions_ensure", "writes.keys_claim", "services._conflicting",
    "writes.records_write", "writes.usage_write", "services._touch_api_keys",
    "live.rollups_ingest", "staging.rollups_stage", "staging.rollups_flush_after_ingest",
)  # fmt: skip


def profile_one(root: Path, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """The in-process CPU per 1000 records of the tree at ``root``, and its profile."""
    records_file = Path(__file__).with_name("telemetry_server.py")
    done = subprocess.run(
        [PY, "-c", PROFILE, str(records_file), str(args.records), str(args.batch)],
        cwd=root, env={**env, "PYTHONPATH": str(root), "DJANGO_SETTINGS_MODULE":
                       "controlplane.settings"}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"profile of {root} failed:\n{done.stderr[-3000:]}")
    out = done.stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def profile_report(results: dict[str, dict[str, Any]], top: int) -> None:
    """CPU per 1000 records by stage (profile shares scaled to the unprofiled CPU), then the
    functions of the newest tree with the most own time."""
    print("\n| stage (ms CPU per 1000 records, in-process) | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))

    def scaled(r: dict[str, Any], seconds: float) -> float:
        return float(seconds / r["profiled_s"] * r["cpu_ms_per_1000"])

    for stage in STAGES:
        cells = [r["functions"].get(stage) for r in results.values()]
        if any(cells):
            row = [f"{scaled(r, c[1]):.1f}" if c else "-" for r, c in
                   zip(results.values(), cells, strict=True)]  # fmt: skip
            print(f"| {stage} | " + " | ".join(row) + " |")
    print("| **total** | " + " | ".join(f"{r['cpu_ms_per_1000']:.1f}" for r in results.values())
          + " |")  # fmt: skip
    name, last = list(results.items())[-1]
    print(f"\n{name}: top {top} functions by own time (ms CPU per 1000 records)")
    ranked = sorted(last["functions"].items(), key=lambda kv: -kv[1][0])[:top]
    for function, (own, cumulative) in ranked:
        print(f"  {scaled(last, own):6.2f} own {scaled(last, cumulative):7.2f} cum  {function}")
