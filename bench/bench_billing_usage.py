"""Usage aggregation over one million usage rows on PostgreSQL, beside a naive baseline.

Run by hand (not a test)::

    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/pdd_ci
    .venv/bin/python bench/bench_billing_usage.py

It creates a separate database ``<name>_bench_billing`` on the same server, migrates it, loads
the rows with COPY, times ``selectors.usage_aggregate`` (GROUP BY in the database) by day and
by day+model for one tenant-month and for all tenants, and the naive way (fetch rows, sum in
Python) on a sample scaled to the same row count; then drops the database (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _bench_url(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        sys.exit("DATABASE_URL must point at PostgreSQL")
    name = parts.path.lstrip("/") + "_bench_billing"
    admin = urlunsplit(parts._replace(path="/postgres"))
    return urlunsplit(parts._replace(path="/" + name)), admin, name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    bench_url, admin_url, name = _bench_url(os.environ.get("DATABASE_URL", ""))

    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = bench_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    try:
        run(args.rows, args.sample)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _load(rows: int) -> float:
    from django.db import connection

    from controlplane.tenancy.models import Tenant

    tenants = [Tenant.objects.create(slug=f"t{i}", name=f"T{i}").pk for i in range(20)]
    models = ["deepseek-v3", "llama-3.1-70b", "qwen3-235b", "kimi-k2"]
    start = datetime(2025, 1, 1, tzinfo=UTC)
    rng = random.Random(7)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        copy_sql = (
            "COPY billing_usagerecord (request_id, tenant_id, model, site, pipeline, time, "
            "miss_tokens, hit_tokens, output_tokens, sla_met, received_at) FROM STDIN"
        )
        with cursor.connection.cursor().copy(copy_sql) as copy:  # type: ignore[attr-defined]
            for i in range(rows):
                when = start + timedelta(seconds=rng.randrange(90 * 86400))
                inp = rng.randrange(100, 20000)
                hit = int(inp * rng.random())
                copy.write_row((f"r{i}", rng.choice(tenants), rng.choice(models), "dc-a",
                                "P-RLD-MD", when, inp - hit, hit, rng.randrange(1, 2000),
                                rng.random() < 0.95, when))  # fmt: skip
        cursor.execute("ANALYZE billing_usagerecord")
    return time.perf_counter() - began


def _timed(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def _naive(qs, sample: int) -> int:  # type: ignore[no-untyped-def]
    """The baseline: fetch the rows and sum per (day, model) in Python."""
    sums: dict[tuple[object, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for when, model, miss, hit, out in qs.values_list(
        "time", "model", "miss_tokens", "hit_tokens", "output_tokens"
    )[:sample].iterator(chunk_size=10_000):
        acc = sums[(when.date(), model)]
        acc[0] += 1
        acc[1] += miss
        acc[2] += hit
        acc[3] += out
    return len(sums)


def run(rows: int, sample: int) -> None:
    from django.core.management import call_command

    from controlplane.billing import selectors
    from controlplane.billing.models import UsageRecord
    from controlplane.tenancy.models import Tenant

    call_command("migrate", verbosity=0)
    load_s = _load(rows)
    total = UsageRecord.objects.count()
    jan = (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 2, 1, tzinfo=UTC))
    everything = (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC))
    tenant = Tenant.objects.get(slug="t3").pk
    cases = [
        ("one tenant, one month", tenant, jan),
        ("all tenants, 3 months", None, everything),
    ]
    print(f"loaded {total:,} usage rows with COPY in {load_s:.1f} s\n")
    print(f"{'query':<24} {'group_by':<10} {'rows in':>10} {'groups':>7} {'database':>10} "
          f"{'naive*':>10} {'ratio':>7}")  # fmt: skip
    for label, tenant_id, (start, end) in cases:
        qs = selectors.usage_filtered(tenant_id=tenant_id, start=start, end=end)
        n = qs.count()
        for bucket, dims in (("day", ()), ("day", ("model",))):
            groups = len(selectors.usage_aggregate(qs, bucket=bucket, dimensions=dims))
            db_s = _timed(lambda q=qs, b=bucket, d=dims: selectors.usage_aggregate(
                q, bucket=b, dimensions=d))  # fmt: skip
            taken = min(sample, n)
            naive_s = _timed(lambda q=qs, t=taken: _naive(q, t), repeat=1) * (n / max(taken, 1))
            group_by = ",".join([bucket, *dims])
            print(f"{label:<24} {group_by:<10} {n:>10,} {groups:>7} {db_s * 1000:>8.1f}ms "
                  f"{naive_s * 1000:>8.1f}ms {naive_s / db_s:>6.1f}x")  # fmt: skip
    print(f"\n* naive: fetch rows and sum in Python, timed on up to {sample:,} rows and scaled "
          "linearly to the row count.")  # fmt: skip


if __name__ == "__main__":
    main()
