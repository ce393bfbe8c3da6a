"""What ``bench_telemetry.py`` measures: the records it posts, a scratch database, daphne
processes running a tree's control plane and their CPU time from /proc (Linux), a baseline tree
from git. Standard library only at import (``--profile`` loads this file by path for
``records``)."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proc_stat import cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
# The key prefix of each tenant's records: ingestion bills a record to the tenant of its key.
KEYS = {"bench": "be4c", "probe": "9e0be"}
# What the records need in either tree: the tenants with their keys, the model "m" (8B, GQA),
# site dc-a and its gateway agent "bench-gw" (records are taken from a site's gateways only).
WORLD = """
from controlplane.agents.models import Agent
from controlplane.billing.models import ApiKey
from django.apps import apps
# Tenant moved from billing to its own app (issue 30); a baseline tree may have it in billing.
home = "tenancy" if apps.is_installed("controlplane.tenancy") else "billing"
Tenant = apps.get_model(home, "Tenant")
from controlplane.inventory.models import ModelProfile, Site
for slug, prefix in KEYS.items():
    tenant = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})[0]
    ApiKey.objects.get_or_create(prefix=prefix, defaults={
        "tenant": tenant, "name": "bench", "key_hash": (prefix * 16)[:64]})
ModelProfile.objects.get_or_create(slug="m", defaults={
    "name": "M", "total_params_b": 8.0, "active_params_b": 8.0, "layers": 32,
    "hidden_size": 4096, "attention": "gqa", "attention_heads": 32, "kv_heads": 8,
    "head_dim": 128, "source": "bench"})
site = Site.objects.get_or_create(slug="dc-a", defaults={"name": "DC A"})[0]
Agent.objects.get_or_create(name="bench-gw", defaults={"site": site, "role": "gateway"})
""".replace("KEYS", repr(KEYS))
SETUP = (
    WORLD
    + """
from controlplane.accounts.services import api_token_issue
print(api_token_issue(name="bench-agent-%s", scope="agent", site=site).secret)
print(api_token_issue(name="bench-viewer-%s", scope="viewer").secret)
"""
)


def records(n: int, tenant: str = "bench") -> list[dict[str, Any]]:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    out = []
    for i in range(n):
        hit = (i * 37) % 1000
        out.append({
            "request_id": f"{tenant}-{uuid.uuid4().hex}", "tenant": tenant, "model": "m",
            "api_key_prefix": KEYS[tenant], "agent": "bench-gw", "site": "dc-a",
            "pipeline": ("P-MD", "P-RLD-MD")[i % 2],
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


def pg_backends_cpu(url: str | None) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving the database of ``url`` (the
    daphne processes' connections; the server's shared processes are not counted)."""
    if not url:
        return {}
    import psycopg

    with psycopg.connect(url) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()")]  # fmt: skip
    seen = {}
    for pid in pids:
        try:
            seen[pid] = cpu_seconds([pid])
        except (FileNotFoundError, ProcessLookupError):  # the backend ended meanwhile
            continue
    return seen


class Server:
    """Scratch database + daphne processes running the code in ``root``."""

    def __init__(self, env: dict[str, str], procs: int, root: Path) -> None:
        self.env = {**env, "PYTHONPATH": str(root)}
        self.root = root
        self.ports = [free_port() for _ in range(procs)]
        self.procs: list[subprocess.Popen[bytes]] = []

    def manage(self, *args: str) -> str:
        done = subprocess.run([PY, "manage.py", *args], check=False, cwd=self.root,
                              env=self.env, capture_output=True, text=True)  # fmt: skip
        if done.returncode:
            raise SystemExit(f"manage.py {' '.join(args)} in {self.root} failed "
                             f"({done.returncode}):\n{done.stderr[-3000:]}")  # fmt: skip
        return done.stdout

    def start(self) -> tuple[str, str]:
        self.manage("migrate", "--noinput", "-v0")
        tag = uuid.uuid4().hex[:6]
        agent, viewer = self.manage("shell", "-c", SETUP % (tag, tag)).split()[-2:]
        for port in self.ports:
            self.procs.append(subprocess.Popen(
                [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                 "controlplane.asgi:application"],
                cwd=self.root, env=self.env, stdout=subprocess.DEVNULL,
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

    def cpu(self) -> float:
        return cpu_seconds([p.pid for p in self.procs])

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=10)


def postgres_env(base: dict[str, str], args: argparse.Namespace, name: str) -> dict[str, str]:
    import psycopg

    admin = args.postgres.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    url = args.postgres.rsplit("/", 1)[0] + f"/{name}"
    return {**base, "DATABASE_URL": url, "REDIS_URL": args.redis,
            "PDD_CHANNEL_PREFIX": f"bench{uuid.uuid4().hex[:6]}"}  # fmt: skip


def unpack(commit: str, into: Path) -> Path:
    """The control plane of ``commit`` (``git archive``), to run the baseline from."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "manage.py", "controlplane", "frontend",
         "pdd_core", "fixtures"],
        check=True, capture_output=True,
    )  # fmt: skip
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into
