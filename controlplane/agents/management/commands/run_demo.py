"""``python manage.py run_demo``: the whole token factory on one machine (what ``make demo`` runs).

On the embedded defaults (SQLite, in-memory channel layer, in-process tasks) it migrates, seeds
the catalogs, the demo topology and the operator login, makes sure the ``demo`` tenant has a
fresh gateway API key and each demo site (dc-a, dc-b) a fresh site-bound agent token (the
previous demo ones are revoked: secrets are stored hashed, so they cannot be shown again), then
starts daphne, ``pdd up fixtures/dataplane/timed.json`` registered with it, and ``pdd replay``
of the bundled Mooncake sample in a loop with the tenant's key (which the gateway learns from the
config push). It prints the dashboard URL, the gateway URL and the key. Ctrl-C (or SIGTERM)
stops everything: each child is terminated, waited for with a bound, then killed.
``--setup-only`` does the database part and prints the secrets (tests use it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from controlplane.accounts.models import ApiToken
from controlplane.accounts.services import api_token_issue, api_token_revoke
from controlplane.agents.models import Agent
from controlplane.billing.models import ApiKey, Tenant
from controlplane.billing.services import api_key_create, api_key_revoke
from controlplane.inventory.models import Site

ROOT = Path(settings.BASE_DIR)
# ``make demo ENGINE=llamacpp`` sets PDD_DEMO_ENGINE: fixtures/dataplane/<engine>.json is the plane.
TOPOLOGY = ROOT / "fixtures" / "dataplane" / f"{os.environ.get('PDD_DEMO_ENGINE') or 'timed'}.json"
TRACE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"
DEMO_SITES = ("dc-a", "dc-b")
DEMO_TENANT = "demo"
KEY_NAME = "demo gateway"


@dataclass
class DemoSecrets:
    """What the demo's processes need: the tenant's gateway key and one agent token per site."""

    api_key: str
    agent_tokens: dict[str, str] = field(default_factory=dict)


def demo_setup(*, operator: str, password: str) -> DemoSecrets:
    """Migrate, seed, and issue the demo key and agent tokens (revoking the previous ones)."""
    call_command("migrate", interactive=False, verbosity=0)
    call_command("seed_demo", operator=operator, password=password)
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(slug=DEMO_TENANT, defaults={"name": "Demo tenant"})
        previous_keys = ApiKey.objects.filter(
            tenant=tenant, name__startswith=KEY_NAME, revoked_at=None
        )
        for key in previous_keys:
            api_key_revoke(api_key=key)
        # Key names are unique per tenant, revoked ones included.
        name = f"{KEY_NAME} {secrets.token_hex(3)}"
        out = DemoSecrets(api_key_create(tenant=tenant, name=name).secret)
        for slug in DEMO_SITES:
            try:
                site = Site.objects.get(slug=slug)
            except Site.DoesNotExist:
                raise CommandError(f"run_demo: the demo topology has no site {slug!r}") from None
            previous = ApiToken.objects.filter(
                name__startswith=f"demo-agents-{slug}-", revoked_at=None
            )
            for token in previous:
                api_token_revoke(token=token)
            name = f"demo-agents-{slug}-{secrets.token_hex(3)}"
            out.agent_tokens[slug] = api_token_issue(name=name, scope="agent", site=site).secret
    return out


class Command(BaseCommand):
    help = "Run the control plane, a registered demo data plane and replayed load; Ctrl-C stops."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--operator", default="admin")
        parser.add_argument("--password", default="pdd-demo-admin")
        parser.add_argument("--speed", type=float, default=5.0, help="replay time compression")
        parser.add_argument("--setup-only", action="store_true", help="database part only")

    def handle(self, *args: Any, **options: Any) -> None:
        if not TOPOLOGY.is_file():
            raise CommandError(f"run_demo: no demo topology {TOPOLOGY} (PDD_DEMO_ENGINE)")
        demo = demo_setup(operator=options["operator"], password=options["password"])
        if options["setup_only"]:
            self.stdout.write(f"api key: {demo.api_key}")
            for slug, token in demo.agent_tokens.items():
                self.stdout.write(f"agent token {slug}: {token}")
            return
        Demo(self, demo, options).run()


class Demo:
    """The three long-running parts and their orderly stop."""

    def __init__(self, command: Command, demo: DemoSecrets, options: dict[str, Any]) -> None:
        self.out = command.stdout
        self.demo = demo
        self.host, self.port = options["host"], int(options["port"])
        self.operator, self.password = options["operator"], options["password"]
        self.speed = float(options["speed"])
        self.url = f"http://{self.host}:{self.port}"
        self.children: list[subprocess.Popen[str]] = []  # daphne, pdd up
        self.replay: subprocess.Popen[str] | None = None
        self.stop = threading.Event()
        self.run_dir = Path(settings.DATA_DIR) / "demo"

    def _spawn(self, command: list[str], log: Path | None) -> subprocess.Popen[str]:
        out: Any = log.open("a") if log else subprocess.PIPE
        return subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip

    def run(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start()
            while not self.stop.wait(0.5):
                if any(child.poll() is not None for child in self.children):
                    self.out.write(f"run_demo: a part exited; stopping (logs in {self.run_dir})")
                    break
        finally:
            self._stop_all()
            self.out.write("run_demo: stopped")

    def _start(self) -> None:
        python = sys.executable
        self.children.append(self._spawn(
            [python, "-m", "daphne", "-b", self.host, "-p", str(self.port),
             "--application-close-timeout", "3",
             "controlplane.asgi:application"],
            self.run_dir / "daphne.log",
        ))  # fmt: skip
        self._await_port(60)
        tokens = [f"--token={slug}={t}" for slug, t in self.demo.agent_tokens.items()]
        up = self._spawn(
            [python, "-m", "pdd_core", "up", str(TOPOLOGY), "--run-dir",
             str(self.run_dir / "dataplane"), "--control-plane", self.url, *tokens],
            None,
        )  # fmt: skip
        self.children.append(up)
        gateway = self._await_gateway(up, 90)
        self._await_agents(60)
        self.out.write("")
        self.out.write(f"  Dashboard:  {self.url}/   (log in as {self.operator} / {self.password})")
        self.out.write(f"  Agents API: {self.url}/api/v1/agents/   (operator or viewer token)")
        self.out.write(f"  Gateway:    {gateway}/v1   (OpenAI-compatible)")
        self.out.write(f"  API key:    {self.demo.api_key}   (tenant {DEMO_TENANT})")
        self.out.write(f"  Logs:       {self.run_dir}")
        self.out.write(
            "  Load:       pdd replay of the Mooncake sample, in a loop. Ctrl-C stops all."
        )
        self.out.write("")
        threading.Thread(target=self._replay_loop, args=(gateway,), daemon=True).start()

    def _await_port(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            if self.children[0].poll() is not None:
                raise CommandError(f"daphne exited; see {self.run_dir / 'daphne.log'}")
            with contextlib.suppress(OSError):
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return
            time.sleep(0.2)
        raise CommandError(f"daphne did not listen on {self.url} in {timeout_s} s")

    def _await_gateway(self, up: subprocess.Popen[str], timeout_s: float) -> str:
        assert up.stdout is not None
        deadline = time.monotonic() + timeout_s
        gateway = ""
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                raise CommandError("pdd up exited before it was ready")
            if line.startswith("gateway: "):
                gateway = line.split(": ", 1)[1].strip()
            if line.startswith("pids: "):
                threading.Thread(target=_drain, args=(up,), daemon=True).start()
                return gateway
        raise CommandError(f"pdd up was not ready in {timeout_s} s")

    def _await_agents(self, timeout_s: float) -> None:
        """Until every agent of the topology (and the WAN line) heartbeats; prints the roll."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            agents = list(Agent.objects.select_related("site").filter(name__in=_agent_names()))
            if len(agents) == len(_agent_names()) and all(
                a.status == "healthy" and a.config_version is not None for a in agents
            ):
                for a in agents:
                    self.out.write(
                        f"  agent {a.name:8} {a.site.slug:5} {a.role:8} {a.status} "
                        f"config v{a.config_version}"
                    )
                return
            time.sleep(0.5)
        self.out.write("run_demo: not every agent reported in time (see the logs); going on")

    def _replay_loop(self, gateway: str) -> None:
        log = self.run_dir / "replay.log"
        while not self.stop.is_set():
            self.replay = self._spawn(
                [sys.executable, "-m", "pdd_core", "replay", str(TRACE), "--gateway", gateway,
                 "--api-key", self.demo.api_key, "--speed", str(self.speed)],
                log,
            )  # fmt: skip
            while self.replay.poll() is None and not self.stop.wait(0.5):
                pass
            self.stop.wait(1.0)

    def _stop_all(self) -> None:
        """Load first, then the data plane, then the control plane; bounded, then SIGKILL."""
        self.stop.set()
        children = [c for c in (self.replay, *reversed(self.children)) if c is not None]
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=5)


def _agent_names() -> set[str]:
    raw = json.loads(TOPOLOGY.read_text())
    return {a["id"] for a in raw["agents"]} | {"wan"}


def _drain(child: subprocess.Popen[str]) -> None:
    """Read ``pdd up``'s output to the end so it never blocks on a full pipe."""
    for _ in child.stdout or ():
        pass
