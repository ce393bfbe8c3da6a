"""Capacity sweeps fanned out to Celery workers on Redis: wall time, speedup with 1 and 2 workers.

Run by hand (not a test), with PostgreSQL and Redis up::

    .venv/bin/python bench/bench_sweep.py
    .venv/bin/python bench/bench_sweep.py --scenarios small.toml --wan-gbps 10 20 40 80

In one run, on the same sweep (the cross product of ``--scenarios`` x ``--wan-gbps`` x
``--policies``, each point a fixed-load simulation plus a capacity search, ``pdd_core.sweep``):

1. **serial baseline**: ``pdd_core.sweep.run_sweep`` in this process, point after point; its
   per-point times also give the best a 2-worker run can do (a list schedule of those times in
   queue order over two workers: the sweep cannot finish before its longest point);
2. **1 worker**: one ``celery -A controlplane worker --pool=solo`` (concurrency 1) consuming
   from Redis; the sweep is requested through ``sweep_services.sweep_request`` (one task per
   point, a chord gathering the table) and timed from the request to the stored table;
3. **2 workers**: two such workers (concurrency 2 in all).

The workers' tables must equal the serial one (the bench says so). Everything shares this
machine's CPUs with whatever else runs on it: the load average before each run is printed,
and a speedup below the bound is the box, not the fan-out, when the load is high. CPU seconds
(this process's for the serial run; the workers' own from the request to the table, start-up
excluded) show what the fan-out costs apart from the waiting, and CPU over wall how many cores
the run actually got. Each worker starts in its own session: under Linux autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled``) a session's processes share one CPU share, so two
workers in one session would get no more CPU than one.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proc_stat import cpu_seconds  # bench/ is on sys.path: the script's folder

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("colocated", "same-dc", "naive-cross-dc", "pdd")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--postgres", default="postgres://postgres@127.0.0.1:5432/pdd_sweep", help="database URL"
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/7", help="broker and results")
    parser.add_argument(
        "--scenarios", nargs="+", default=["small.toml", "mooncake_conversation.toml"]
    )
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--wan-gbps", nargs="*", type=float, default=[10.0, 40.0])
    parser.add_argument("--iterations", type=int, default=2, help="capacity bisection steps")
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    return parser.parse_args(argv)


def ensure_database(url: str) -> None:
    """Create the database ``url`` names if the server does not have it yet (the bench's own
    tables are migrated into it): a clear error, not a pool timeout, when the server is down."""
    import psycopg
    from psycopg import sql

    info = psycopg.conninfo.conninfo_to_dict(url)
    name = str(info.get("dbname") or "")
    try:
        with psycopg.connect(**{**info, "dbname": "postgres"}, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if found is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                print(f"created database {name}")
    except psycopg.OperationalError as exc:
        raise SystemExit(f"bench_sweep: cannot reach PostgreSQL at {url}: {exc}") from exc


def setup_django(args: argparse.Namespace) -> None:
    ensure_database(args.postgres)
    os.environ["DATABASE_URL"] = args.postgres
    os.environ["REDIS_URL"] = args.redis
    os.environ["PDD_CELERY_EAGER"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ.setdefault("PDD_DATA_DIR", tempfile.mkdtemp(prefix="bench-sweep-"))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def serial(args: argparse.Namespace) -> tuple[float, float, list[float], list[dict[str, Any]]]:
    """The sweep in this process: wall time, CPU time, each point's time, the rows."""
    from controlplane.planning.selectors import SCENARIO_DIR
    from pdd_core.scenario import load_scenario
    from pdd_core.sweep import run_sweep, sweep_points

    points = sweep_points(args.scenarios, args.policies, args.wan_gbps)
    cpu = time.process_time()
    marks = [time.perf_counter()]
    rows = run_sweep(
        lambda name: load_scenario(SCENARIO_DIR / name),
        points,
        iterations=args.iterations,
        progress=lambda done, row: marks.append(time.perf_counter()),
    )
    times = [b - a for a, b in itertools.pairwise(marks)]
    cpu = time.process_time() - cpu
    return marks[-1] - marks[0], cpu, times, [r.to_dict() for r in rows]


def list_schedule(times: Sequence[float], workers: int) -> float:
    """Makespan of running ``times`` in order, each on the first worker free (the broker's
    order with prefetch 1): what ``workers`` workers can do at best with these points."""
    free = [0.0] * workers
    for t in times:
        first = min(range(workers), key=lambda i: free[i])
        free[first] += t
    return max(free)


def start_workers(
    count: int, args: argparse.Namespace, logs: Path
) -> list[subprocess.Popen[bytes]]:
    from controlplane.celery import app

    env = {**os.environ, "PDD_CELERY_EAGER": "0"}
    procs = []
    for index in range(count):
        log = (logs / f"worker-{count}-{index}.log").open("wb")
        command = [
            sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo",
            "-n", f"bench-sweep-{index}@%h", "--loglevel=INFO", "--without-gossip",
            "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        # Each worker in its own session, as separate services would be: with the kernel's
        # autogroup scheduling a session shares one CPU share, however many processes it runs.
        procs.append(
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=1.0) or []
        if len(replies) >= count:
            return procs
        if any(p.poll() is not None for p in procs):
            break
    stop_workers(procs)
    raise RuntimeError(f"{count} worker(s) did not answer a ping; logs in {logs}")


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def process_cpu(procs: Sequence[subprocess.Popen[bytes]]) -> float:
    """CPU seconds (user + system) the running ``procs`` have used so far (Linux ``/proc``)."""
    return cpu_seconds([proc.pid for proc in procs])


def through_workers(
    count: int, args: argparse.Namespace, logs: Path
) -> tuple[float, float, list[dict[str, Any]]]:
    """Request the sweep with ``count`` workers up: seconds from the request to the table, the
    CPU seconds the workers spent on it (start-up excluded), the rows."""
    from controlplane.celery import app
    from controlplane.planning.models import PlanStatus, Sweep
    from controlplane.planning.sweep_services import sweep_request

    app.control.purge()
    procs = start_workers(count, args, logs)
    try:
        cpu = process_cpu(procs)
        start = time.perf_counter()
        sweep = sweep_request(
            scenarios=args.scenarios,
            policies=args.policies,
            wan_gbps=args.wan_gbps,
            iterations=args.iterations,
            requested_by="bench",
        )
        deadline = time.monotonic() + args.timeout
        while True:
            sweep = Sweep.objects.get(pk=sweep.pk)
            if sweep.status in (PlanStatus.DONE, PlanStatus.FAILED):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"sweep {sweep.pk} still {sweep.status} after {args.timeout}s")
            time.sleep(0.05)
        wall = time.perf_counter() - start
        cpu = process_cpu(procs) - cpu
    finally:
        stop_workers(procs)
    if sweep.status != PlanStatus.DONE:
        raise RuntimeError(f"sweep {sweep.pk} failed: {sweep.error}")
    return wall, cpu, list(sweep.rows or [])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    setup_django(args)
    from pdd_core.sweep import sweep_points

    points = sweep_points(args.scenarios, args.policies, args.wan_gbps)
    logs = Path(tempfile.mkdtemp(prefix="bench-sweep-logs-"))
    print(
        f"sweep: {len(points)} points ({len(args.scenarios)} scenarios x "
        f"{max(len(args.wan_gbps), 1)} WAN bandwidths x {len(args.policies)} policies), "
        f"capacity iterations {args.iterations}; {os.cpu_count()} CPUs on this machine"
    )
    load = os.getloadavg()[0]
    serial_s, serial_cpu, times, serial_rows = serial(args)
    runs = [("serial in-process (baseline)", serial_s, serial_cpu, load, True)]
    for count in (1, 2):
        load = os.getloadavg()[0]
        wall, cpu, rows = through_workers(count, args, logs)
        label = f"{count} worker{'s' if count > 1 else ''} (concurrency {count})"
        runs.append((label, wall, cpu, load, rows == serial_rows))
    one = runs[1][1]
    print(
        f"{'mode':<30}{'wall s':>8}{'CPU s':>8}{'cores used':>11}{'vs 1 worker':>13}"
        f"{'vs serial':>11}{'load':>7}  same table"
    )
    for label, wall, cpu, load, same in runs:
        print(
            f"{label:<30}{wall:>8.1f}{cpu:>8.1f}{cpu / wall:>11.2f}{one / wall:>12.2f}x"
            f"{serial_s / wall:>10.2f}x{load:>7.1f}  {'yes' if same else 'NO'}"
        )
    bound = sum(times) / list_schedule(times, 2)
    speedup = one / runs[2][1]
    print(
        f"speedup with 2 workers: {speedup:.2f}x (goal: 2 workers faster than 1, ideally 2.00x); "
        f"bound from the points' own times (list schedule over 2 workers, longest point "
        f"{max(times):.1f} s): {bound:.2f}x; CPUs: {os.cpu_count()} shared with the load shown"
    )
    return 0 if all(same for *_, same in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
