"""Telemetry ingestion throughput and POST-to-WebSocket latency, embedded vs PostgreSQL + Redis.

Run by hand (not a test)::

    .venv/bin/python bench/bench_telemetry.py                    # both backends
    .venv/bin/python bench/bench_telemetry.py --backend embedded --records 30000

For each backend it migrates a scratch database (SQLite in a temporary PDD_DATA_DIR; or
``pdd_bench_monitor`` on the PostgreSQL of ``--postgres`` with Redis db ``--redis`` as channel
layer), starts ``--web-procs`` daphne processes (1 on the embedded defaults: the in-memory layer
cannot span processes), and measures side by side:

- **bulk**: ``--posters`` client threads POST batches of ``--batch`` records (round-robin over
  the processes) to ``/api/v1/telemetry/records/``: records ingested per second;
- **per-record baseline**: the same endpoint with one record per POST;
- **latency**: while the bulk load runs, a probe POSTs one record of tenant ``probe`` 0.6 s
  after the previous probe's message (longer than the live throttle) and waits for the push on
  ``/ws/live/?scope=tenant:probe`` of a WebSocket held on process 0: p50/p99 of POST start ->
  message received.

Client and server share this machine's CPUs; the figures are what one box does, not a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SETUP = """
from controlplane.accounts.services import api_token_issue
from controlplane.billing.models import Tenant
from controlplane.inventory.models import Site
for slug in ("bench", "probe"):
    Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})
site = Site.objects.get_or_create(slug="dc-a", defaults={"name": "DC A"})[0]
print(api_token_issue(name="bench-agent-%s", scope="agent", site=site).secret)
print(api_token_issue(name="bench-viewer-%s", scope="viewer").secret)
"""


def records(n: int, tenant: str = "bench") -> list[dict[str, Any]]:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    out = []
    for i in range(n):
        hit = (i * 37) % 1000
        out.append({
            "request_id": f"{tenant}-{uuid.uuid4().hex}", "tenant": tenant, "model": "m",
            "site": "dc-a", "pipeline": ("P-MD", "P-RLD-MD")[i % 2],
            "arrival_time": now, "finish_time": now, "input_tokens": 1000, "hit_tokens": hit,
            "miss_tokens": 1000 - hit, "output_tokens": 200, "ttft_s": 0.1 + (i % 50) / 100,
            "tpot_s": 0.03, "wan_bytes": 5_000_000, "handoff_mode": "one-shot",
            "rld_tokens": 12, "md_tokens": 188, "sla_met": True,
        })  # fmt: skip
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """Scratch database + daphne processes for one backend."""

    def __init__(self, env: dict[str, str], procs: int) -> None:
        self.env = env
        self.ports = [free_port() for _ in range(procs)]
        self.procs: list[subprocess.Popen[bytes]] = []

    def manage(self, *args: str) -> str:
        return subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True).stdout  # fmt: skip

    def start(self) -> tuple[str, str]:
        self.manage("migrate", "--noinput", "-v0")
        tag = uuid.uuid4().hex[:6]
        agent, viewer = self.manage("shell", "-c", SETUP % (tag, tag)).split()[-2:]
        for port in self.ports:
            self.procs.append(subprocess.Popen(
                [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                 "controlplane.asgi:application"],
                cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                stderr=open(Path(self.env["PDD_DATA_DIR"]) / f"daphne-{port}.log", "w"),  # noqa: SIM115
            ))  # fmt: skip
        for port in self.ports:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
        return agent, viewer

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=10)


def post(conn: http.client.HTTPConnection, token: str, body: bytes) -> int:
    conn.request("POST", "/api/v1/telemetry/records/", body=body,
                 headers={"Authorization": f"Bearer {token}",
                          "Content-Type": "application/json"})  # fmt: skip
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{response.status}: {data[:300]!r}")
    return int(json.loads(data)["accepted"])


def load(ports: list[int], token: str, total: int, batch: int, posters: int) -> float:
    """Records per second of ``total`` records in batches of ``batch`` over ``posters``."""
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
    return sum(accepted) / elapsed


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


def run_backend(
    name: str, env: dict[str, str], args: argparse.Namespace, procs: int
) -> dict[str, Any]:
    server = Server(env, procs)
    agent, viewer = server.start()
    try:
        load(server.ports, agent, args.batch * 2, args.batch, 1)  # warm-up
        single = load(server.ports, agent, args.single, 1, args.posters)
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
        bulk = load(server.ports, agent, args.records, args.batch, args.posters)
        measuring.clear()
        stop.set()
        prober.join()
        lat = result["lat"]
        return {"backend": name, "procs": procs, "single": single, "bulk": bulk,
                "p50": pct(lat, 50), "p99": pct(lat, 99), "probes": len(lat)}  # fmt: skip
    finally:
        server.stop()


def postgres_env(base: dict[str, str], args: argparse.Namespace) -> dict[str, str]:
    import psycopg

    admin = args.postgres.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS pdd_bench_monitor WITH (FORCE)")
        conn.execute("CREATE DATABASE pdd_bench_monitor")
    url = args.postgres.rsplit("/", 1)[0] + "/pdd_bench_monitor"
    return {**base, "DATABASE_URL": url, "REDIS_URL": args.redis,
            "PDD_CHANNEL_PREFIX": f"bench{uuid.uuid4().hex[:6]}"}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["embedded", "postgres", "both"], default="both")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--single", type=int, default=1000, help="records for the baseline")
    parser.add_argument("--posters", type=int, default=4)
    parser.add_argument("--web-procs", type=int, default=2, help="daphne processes (postgres)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    rows = []
    tmp = tempfile.mkdtemp(prefix="pdd-bench-telemetry-")
    print(f"server logs in {tmp}")
    base["PDD_DATA_DIR"] = tmp
    base["PDD_LOG_LEVEL"] = "WARNING"
    try:
        if args.backend in {"embedded", "both"}:
            rows.append(run_backend("SQLite + in-memory", base, args, 1))
        if args.backend in {"postgres", "both"}:
            env = postgres_env(base, args)
            rows.append(run_backend("PostgreSQL + Redis", env, args, 1))
            if args.web_procs > 1:
                rows.append(run_backend("PostgreSQL + Redis", postgres_env(base, args), args,
                                        args.web_procs))  # fmt: skip
    finally:
        if not os.environ.get("PDD_BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{os.cpu_count()} CPUs; bulk = {args.batch} records/POST, {args.posters} posters, "
          f"{args.records} records; baseline = 1 record/POST\n")  # fmt: skip
    print("| backend | daphne procs | per-record rec/s | bulk rec/s | bulk/per-record | "
          "POST->WS p50 ms | p99 ms | probes |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['procs']} | {r['single']:,.0f} | {r['bulk']:,.0f} | "
              f"{r['bulk'] / r['single']:.1f}x | {r['p50'] * 1e3:.0f} | {r['p99'] * 1e3:.0f} | "
              f"{r['probes']} |")  # fmt: skip


if __name__ == "__main__":
    main()
