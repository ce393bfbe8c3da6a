"""Telemetry ingestion throughput and POST-to-WebSocket latency: this tree vs a baseline commit.

Run by hand (not a test)::

    .venv/bin/python bench/bench_telemetry.py                       # PostgreSQL + Redis
    .venv/bin/python bench/bench_telemetry.py --records 20000 --baseline 81c2089
    .venv/bin/python bench/bench_telemetry.py --backend embedded     # SQLite, this tree only

For each code path, this tree (``now``) and the ``--baseline`` commit unpacked with ``git
archive`` into a temporary directory (``base``; by default the commit before the bulk ingestion
path), and for 1 and 2 daphne processes, it migrates a scratch PostgreSQL database (Redis db
``--redis`` as channel layer), starts the processes and measures:

- **bulk**: ``--posters`` client threads POST batches of ``--batch`` records (round-robin over
  the processes) to ``/api/v1/telemetry/records/``: records ingested per second, and per
  CPU-second of the daphne processes (their user + system time over the load, from /proc) and
  per CPU-second of the PostgreSQL backends serving them (their database's sessions in
  ``pg_stat_activity``, same /proc figures; the server's shared WAL writer and checkpointer
  are not counted);
- **rollups exact**: after the load, the all-time rollup counters sum to the stored records
  (both processes added to the same rows);
- **latency**: while the bulk load runs, a probe POSTs one record of tenant ``probe`` 0.6 s
  after the previous probe's message (longer than the live throttle) and waits for the push on
  ``/ws/live/?scope=tenant:probe`` of a WebSocket held on process 0: p50/p99 of POST start ->
  message received.

``--profile`` calls the ingestion service in-process instead (no HTTP): CPU per 1000 records
by stage, and the functions with the most own CPU time (cProfile), this tree vs ``--baseline``.

Client, servers and PostgreSQL share this machine's CPUs (and other users'): the figures are
what this box does, not a cluster; the per-CPU-second figure is the one that carries over.
GOAL_RPS is the goal of issue #16 (a fleet at 10,000 requests/s reporting with headroom).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# bench/ is on sys.path: the script's folder.
from telemetry_profile import profile_one, profile_report
from telemetry_server import ROOT, Server, pg_backends_cpu, postgres_env, records, unpack

GOAL_RPS = 50_000
GOAL_P99_S = 1.0
# Issue #29: records per CPU-second of the web processes and PostgreSQL's backends together.
GOAL_PER_CPU = 25_000
# The last commit before the bulk ingestion path (msgspec, COPY, request keys, partitions).
BASELINE = "81c2089"


# Rollups exact across processes: the all-time counters sum to the stored records, once the
# deltas still staged after the load (if any) are flushed, as beat does every 2 s (the
# baseline tree rolls up inside its ingestion transaction and stages nothing).
ROLLUPS_CHECK = """
from django.db.models import Sum
from controlplane.telemetry.models import RequestRecord, TelemetryRollup
try:
    from controlplane.telemetry.staging import rollups_flush
except ImportError:
    rollups_flush = lambda wait: 0
left = rollups_flush(wait=True)
total = TelemetryRollup.objects.filter(window_s=0).aggregate(n=Sum("requests"))["n"]
print(RequestRecord.objects.count(), total, left)
"""


def post(conn: http.client.HTTPConnection, token: str, body: bytes) -> int:
    conn.request("POST", "/api/v1/telemetry/records/", body=body,
                 headers={"Authorization": f"Bearer {token}",
                          "Content-Type": "application/json"})  # fmt: skip
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{response.status}: {data[:300]!r}")
    return int(json.loads(data)["accepted"])


def load(ports: list[int], token: str, total: int, batch: int, posters: int) -> tuple[float, float]:
    """Records per second of ``total`` records in batches of ``batch`` over ``posters``, and
    the seconds it took."""
    bodies = [json.dumps({"records": records(batch)}).encode() for _ in range(total // batch)]
    chunks = [bodies[i::posters] for i in range(posters)]
    accepted = [0] * posters

    def run(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", ports[i % len(ports)], timeout=120)
        for body in chunks[i]:
            accepted[i] += post(conn, token, body)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(posters)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    assert sum(accepted) == len(bodies) * batch, (sum(accepted), len(bodies) * batch)
    return sum(accepted) / elapsed, elapsed


async def probe_latencies(ports: list[int], agent: str, viewer: str, stop: threading.Event,
                          measuring: threading.Event) -> list[float]:  # fmt: skip
    import websockets

    url = f"ws://127.0.0.1:{ports[0]}/ws/live/?scope=tenant:probe&token={viewer}"
    latencies: list[float] = []
    conn = http.client.HTTPConnection("127.0.0.1", ports[-1], timeout=60)
    async with websockets.connect(url, max_size=None) as ws:
        while not stop.is_set():
            body = json.dumps({"records": records(1, "probe")}).encode()
            sent = time.perf_counter()
            await asyncio.to_thread(post, conn, agent, body)
            try:
                await asyncio.wait_for(ws.recv(), timeout=10)
                latency = time.perf_counter() - sent
            except TimeoutError:
                latency = float("inf")
            if measuring.is_set():  # only probes sent while the bulk load runs count
                latencies.append(latency)
            # the next push to this group must come after the throttle interval (500 ms)
            await asyncio.sleep(0.6)
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def run_one(path: str, root: Path, env: dict[str, str], args: argparse.Namespace,
            procs: int) -> dict[str, Any]:  # fmt: skip
    server = Server(env, procs, root)
    agent, viewer = server.start()
    try:
        load(server.ports, agent, args.batch * 2, args.batch, 1)  # warm-up
        stop, measuring = threading.Event(), threading.Event()
        result: dict[str, Any] = {}

        def probes() -> None:
            result["lat"] = asyncio.run(
                probe_latencies(server.ports, agent, viewer, stop, measuring)
            )

        prober = threading.Thread(target=probes)
        prober.start()
        time.sleep(1.5)
        measuring.set()
        cpu, pg_before = server.cpu(), pg_backends_cpu(env.get("DATABASE_URL"))
        bulk, elapsed = load(server.ports, agent, args.records, args.batch, args.posters)
        cpu = server.cpu() - cpu
        pg_after = pg_backends_cpu(env.get("DATABASE_URL"))
        pg_cpu = sum(t - pg_before.get(pid, 0.0) for pid, t in pg_after.items())
        measuring.clear()
        stop.set()
        prober.join()
        lat = result["lat"]
        stored, counted, left = server.manage("shell", "-c", ROLLUPS_CHECK).split()[-3:]
        return {"path": path, "procs": procs, "bulk": bulk, "per_cpu": bulk * elapsed / cpu,
                "per_pg_cpu": bulk * elapsed / pg_cpu if pg_cpu > 0 else float("nan"),
                "per_both_cpu": bulk * elapsed / (cpu + pg_cpu),
                "cpu_share": cpu / elapsed, "p50": pct(lat, 50), "p99": pct(lat, 99),
                "probes": len(lat), "exact": stored == counted,
                "left": int(left)}  # fmt: skip
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["embedded", "postgres"], default="postgres")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--posters", type=int, default=4)
    parser.add_argument("--web-procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--baseline", default=BASELINE, help="commit of the previous path")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--db-prefix", default="pdd_bench_telemetry")
    parser.add_argument("--profile", action="store_true",
                        help="call the ingestion service in-process instead: CPU per 1000 "
                        "records by stage and a cProfile, this tree vs --baseline")  # fmt: skip
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each path, alternating which goes first; the "
                        "tables give each figure's best run (noise only slows)")  # fmt: skip
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL", "PYTHONPATH"}}  # fmt: skip
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="pdd-bench-telemetry-"))
    print(f"server logs in {tmp}")
    base["PDD_DATA_DIR"] = str(tmp)
    base["PDD_LOG_LEVEL"] = "WARNING"
    try:
        if args.profile:
            roots = [("base", unpack(args.baseline, tmp / "base")), ("now", ROOT)]
            profiles: dict[str, dict[str, Any]] = {}
            for rep in range(args.repeat):
                for path, root in roots if rep % 2 == 0 else roots[::-1]:
                    env = {**base, "PDD_DATA_DIR": str(tmp / path)}
                    if args.backend == "postgres":
                        env = postgres_env(env, args, f"{args.db_prefix}_{path}")
                    run = profile_one(root, env, args)
                    print(f"run {rep + 1} {path}: {run['cpu_ms_per_1000']:.1f} ms CPU per 1000")
                    best = profiles.get(path)
                    if best is None or run["cpu_ms_per_1000"] < best["cpu_ms_per_1000"]:
                        profiles[path] = run
            profile_report({p: profiles[p] for p, _ in roots}, args.top)
            return
        if args.backend == "embedded":  # the in-memory layer cannot span processes
            rows.append(run_one("now", ROOT, base, args, 1))
        else:
            paths = [("base", unpack(args.baseline, tmp / "base")), ("now", ROOT)]
            for rep in range(args.repeat):
                for procs in args.web_procs:
                    for path, root in paths if rep % 2 == 0 else paths[::-1]:
                        env = postgres_env(base, args, f"{args.db_prefix}_{path}")
                        rows.append(run_one(path, root, env, args, procs))
    finally:
        if not os.environ.get("PDD_BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    backend = "SQLite + in-memory" if args.backend == "embedded" else "PostgreSQL + Redis"
    print(f"\n{backend}; {os.cpu_count()} CPUs (shared); {args.batch} records/POST, "
          f"{args.posters} posters, {args.records} records; base = {args.baseline}\n")  # fmt: skip
    if args.repeat > 1:
        print("every run:")
        print_table(rows)
        print(f"\nbest of {args.repeat} runs, figure by figure:")
        rows = best_rows(rows)
    print_table(rows)
    for procs in args.web_procs:
        now = [r for r in rows if r["path"] == "now" and r["procs"] == procs]
        old = [r for r in rows if r["path"] == "base" and r["procs"] == procs]
        if now and old:
            n, o = now[0], old[0]
            print(f"{procs} procs: now / base = {n['bulk'] / o['bulk']:.1f}x records/s, "
                  f"{n['per_cpu'] / o['per_cpu']:.1f}x per daphne CPU-s, "
                  f"{n['per_pg_cpu'] / o['per_pg_cpu']:.1f}x per PostgreSQL CPU-s")  # fmt: skip


def best_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (path, procs): the highest rates and lowest latencies of its runs; exact
    only if every run was."""
    best = []
    for key in dict.fromkeys((r["path"], r["procs"]) for r in rows):
        runs = [r for r in rows if (r["path"], r["procs"]) == key]
        row = dict(runs[0])
        for name in ("bulk", "per_cpu", "per_pg_cpu", "per_both_cpu"):
            row[name] = max(r[name] for r in runs)
        for name in ("p50", "p99", "cpu_share"):
            row[name] = min(r[name] for r in runs)
        row["probes"] = sum(r["probes"] for r in runs)
        row["exact"] = all(r["exact"] for r in runs)
        row["left"] = max(r["left"] for r in runs)
        best.append(row)
    return best


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| path | daphne procs | records/s | goal | records per daphne CPU-s | "
          "records per PostgreSQL-backend CPU-s | records per CPU-s of both | goal | "
          "daphne CPUs busy | POST->WS p50 ms | p99 ms | p99 goal ms | probes | "
          "rollups = records |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['path']} | {r['procs']} | {r['bulk']:,.0f} | {GOAL_RPS:,} | "
              f"{r['per_cpu']:,.0f} | {r['per_pg_cpu']:,.0f} | {r['per_both_cpu']:,.0f} | "
              f"{GOAL_PER_CPU:,} | {r['cpu_share']:.2f} | "
              f"{r['p50'] * 1e3:.0f} | "
              f"{r['p99'] * 1e3:.0f} | {GOAL_P99_S * 1e3:.0f} | {r['probes']} | "
              f"{'yes' if r['exact'] else 'NO'} ({r['left']} left staged) |")  # fmt: skip


if __name__ == "__main__":
    main()
