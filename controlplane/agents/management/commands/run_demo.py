"""``python manage.py run_demo``: the whole token factory on one machine (what ``make demo`` runs).

On the embedded defaults (SQLite, in-memory channel layer, in-process tasks) it checks that its
ports are free (and stops at once, saying which one is taken, if not), migrates, seeds the
catalogs, the demo topology (its WAN link as the demo's emulator runs it), SLA rules, price books
and the operator login, and makes sure the
``demo`` tenant has a gateway API key and each demo site (dc-a, dc-b) a site-bound agent token:
the ones of the previous run while they are still active (``controlplane.agents.management.
demo``), so the key and the gateway port stay the same across restarts. Then it starts daphne,
``pdd up fixtures/dataplane/timed.json`` registered with it (the gateway on ``--gateway-port``),
``manage.py evaluate_alerts --every 5`` (there is no beat process here), ``pdd replay`` of the
bundled Mooncake sample in a loop with the tenant's key (scaled down by ``DEMO_REPLAY_ARGS`` so
that the whole demo fits a 2-core machine), and one scripted WAN incident (the
emulated line's round trip raised for a while, then restored) so that an alert opens and
resolves in the first minutes. It prints the dashboard URL, the gateway URL and the key.
Ctrl-C (or SIGTERM) stops everything: each child is terminated, waited for with a bound, then
killed. ``--setup-only`` does the database part and prints the secrets (tests use it);
``--reset`` empties the database and forgets the secrets first (``make demo-reset``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.agents.management.demo import (
    DEMO_TENANT,
    DemoSecrets,
    demo_dir,
    demo_reset,
    demo_setup,
)
from controlplane.agents.management.demo_incident import INCIDENT_RTT_MS, INCIDENT_S, wan_incident
from controlplane.agents.management.demo_mix import DEMO_ROUTING, MIX_PERIOD_S, mix_loop
from controlplane.agents.models import Agent
from controlplane.planning.selectors import active_plan

ROOT = Path(settings.BASE_DIR)
# ``make demo ENGINE=llamacpp`` sets PDD_DEMO_ENGINE: fixtures/dataplane/<engine>.json is the plane.
TOPOLOGY = ROOT / "fixtures" / "dataplane" / f"{os.environ.get('PDD_DEMO_ENGINE') or 'timed'}.json"
TRACE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"
# The timed plane's load (a demo setting, not physics): the trace's prompts at 1/16 of their
# native size (a 512-token Mooncake block sent as 32 tokens) and outputs at 1/8, so that the
# whole demo (control plane, seven agents, the load) fits a 2-core machine and the SLA holds
# outside the scripted incident; ``pdd replay --help`` explains both options.
DEMO_REPLAY_ARGS = ["--block-tokens", "32", "--output-scale", "8"]
# After the load stops: time for the gateway to cancel its abandoned requests at the agents.
GATEWAY_DRAIN_S = 2.0


class Command(BaseCommand):
    help = "Run the control plane, a registered demo data plane and replayed load; Ctrl-C stops."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--gateway-port", type=int, default=8001)
        parser.add_argument("--operator", default="admin")
        parser.add_argument("--password", default="pdd-demo-admin")
        parser.add_argument("--speed", type=float, default=1.0, help="replay time compression")
        parser.add_argument("--setup-only", action="store_true", help="database part only")
        parser.add_argument("--reset", action="store_true", help="start over: empty database")
        parser.add_argument(
            "--incident-after", type=float, default=60.0,
            help="seconds after start of the scripted WAN incident (negative: none)",
        )  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        if not TOPOLOGY.is_file():
            raise CommandError(f"run_demo: no demo topology {TOPOLOGY} (PDD_DEMO_ENGINE)")
        if not options["setup_only"]:
            for port in (options["port"], options["gateway_port"]):
                check_port_free(options["host"], port)
        if options["reset"]:
            demo_reset()
            self.stdout.write("run_demo: database emptied, demo secrets forgotten (a fresh start)")
        demo = demo_setup(
            operator=options["operator"], password=options["password"], dataplane=TOPOLOGY
        )
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
        self.gateway_port = int(options["gateway_port"])
        self.incident_after = float(options["incident_after"])
        self.operator, self.password = options["operator"], options["password"]
        self.speed = float(options["speed"])
        self.url = f"http://{self.host}:{self.port}"
        self.children: list[subprocess.Popen[str]] = []  # daphne, pdd up
        self.replay: subprocess.Popen[str] | None = None
        self.mix: subprocess.Popen[str] | None = None  # the PDD mix (demo_mix), timed plane only
        self.stop = threading.Event()
        self.run_dir = demo_dir()

    def _spawn(
        self, command: list[str], log: Path | None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        out: Any = log.open("a") if log else subprocess.PIPE
        # A session of its own: Ctrl-C in the terminal reaches run_demo only, which then stops
        # the parts in order (a part interrupted mid-request by the same signal logs errors).
        return subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, env=env, start_new_session=True,
        )  # fmt: skip

    def run(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start()
            while not self.stop.wait(0.5):
                exited = [c for c in self.children if c.poll() is not None]
                if exited:
                    self.out.write(f"run_demo: {_name(exited[0])} exited; stopping")
                    self.out.write(self._log_tail(exited[0]))
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
        self.children.append(self._spawn(
            [python, "manage.py", "evaluate_alerts", "--every", "5"],
            self.run_dir / "alerts.log",
        ))  # fmt: skip
        # Site tokens travel in the environment: a command line is visible to ps.
        tokens = ",".join(f"{slug}={t}" for slug, t in self.demo.agent_tokens.items())
        up = self._spawn(
            [python, "-m", "pdd_core", "up", str(self._topology()), "--run-dir",
             str(self.run_dir / "dataplane"), "--control-plane", self.url],
            None,
            env={**os.environ, "PDD_CONTROL_TOKENS": tokens},
        )  # fmt: skip
        self.children.append(up)
        gateway = self._await_gateway(up, 90)
        self._await_agents(60)
        self.banner(gateway)
        threading.Thread(target=self._replay_loop, args=(gateway,), daemon=True).start()
        if _timed():
            threading.Thread(target=mix_loop, daemon=True, args=(
                self._spawn_mix, lambda trace: self._replay_command(trace, gateway),
                self.run_dir, self.stop)).start()  # fmt: skip
        if self.incident_after >= 0:
            wan = self.run_dir / "dataplane" / "dataplane.json"
            threading.Thread(target=wan_incident, args=(wan, self.incident_after, self.stop,
                             self.run_dir / "incident.log"), daemon=True).start()  # fmt: skip

    def _topology(self) -> Path:
        """The demo topology with the gateway on ``--gateway-port`` (stable across restarts)."""
        raw = json.loads(TOPOLOGY.read_text(encoding="utf-8"))
        for agent in raw["agents"]:
            if agent["role"] == "gateway":
                agent["port"] = self.gateway_port
        if _timed():  # the PDD mix's handoffs (demo_mix.DEMO_ROUTING)
            raw["routing"] = {**raw.get("routing", {}), **DEMO_ROUTING}
        path = self.run_dir / "topology.json"
        path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
        return path

    def banner(self, gateway: str) -> None:
        """What the demo prints once it runs: URLs, the key, a curl to try, what is going on."""
        key = self.demo.api_key
        again = "same as last run" if self.demo.reused else "new"
        lines = [
            "",
            f"  Dashboard:  {self.url}/   (log in as {self.operator} / {self.password})",
            f"  Agents API: {self.url}/api/v1/agents/   (operator or viewer token)",
            f"  Gateway:    {gateway}   (OpenAI-compatible; base URL for clients: {gateway}/v1)",
            f"  API key:    {key}   (tenant {DEMO_TENANT}; {again})",
            f'  Try:        curl {gateway}/v1/completions -H "Authorization: Bearer {key}" '
            """-d '{"prompt": "hello", "max_tokens": 8}'""",
            f"  Invoice:    {self.url}/billing/invoices/{DEMO_TENANT}/{time.strftime('%Y-%m')}/"
            "   (this month's draft, priced by the seeded price book; JSON at /api/v1/billing/"
            f"invoices/{DEMO_TENANT}/{time.strftime('%Y-%m')}/)",
            f"  Logs:       {self.run_dir}",
            wan_line(),
            "  Load:       pdd replay of the Mooncake sample, in a loop"
            + (
                f", and every {MIX_PERIOD_S:.0f} s three fresh long prompts (P-RLD, P-RLD-MD)"
                if _timed()
                else ""
            )
            + ". Ctrl-C stops all.",
        ]
        if self.incident_after >= 0:
            lines.append(
                f"  Incident:   in {self.incident_after:.0f} s the WAN's round trip rises to "
                f"{INCIDENT_RTT_MS:.0f} ms for {INCIDENT_S:.0f} s: watch the alert open and resolve"
            )
        plan = active_plan()
        if plan is not None:
            lines.append(
                f"  Plan:       plan {plan.pk} (config v{plan.version}) from an earlier run is "
                "still active: the agents run its routing table. `make demo-reset` starts over."
            )
        self.out.write("\n".join([*lines, ""]))

    def _log_tail(self, child: subprocess.Popen[str], lines: int = 15) -> str:
        """The end of a part's log, so the cause of its exit is on the screen."""
        log = self.run_dir / f"{_name(child)}.log"
        try:
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {log})"
        return "\n".join([f"--- last lines of {log}:", *tail])

    def _await_port(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            if self.children[0].poll() is not None:
                raise CommandError(f"daphne exited\n{self._log_tail(self.children[0])}")
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
        # A topology for a small real model scales the trace down ("demo_replay_args"); the
        # timed plane replays it with DEMO_REPLAY_ARGS.
        scale = json.loads(TOPOLOGY.read_text(encoding="utf-8")).get(
            "demo_replay_args", DEMO_REPLAY_ARGS
        )
        while not self.stop.is_set():
            self.replay = self._spawn(
                [*self._replay_command(TRACE, gateway), *[str(arg) for arg in scale]],
                log, env=self._replay_env(),
            )  # fmt: skip
            while self.replay.poll() is None and not self.stop.wait(0.5):
                pass
            self.stop.wait(1.0)

    def _replay_command(self, trace: Path, gateway: str) -> list[str]:
        return [sys.executable, "-m", "pdd_core", "replay", str(trace), "--gateway", gateway,
                "--speed", str(self.speed)]  # fmt: skip

    def _replay_env(self) -> dict[str, str]:
        """The key travels in the environment (ps shows argv)."""
        return {**os.environ, "PDD_API_KEY": self.demo.api_key}

    def _spawn_mix(self, command: list[str], log: Path) -> subprocess.Popen[str]:
        self.mix = self._spawn(command, log, env=self._replay_env())
        return self.mix

    def _stop_all(self) -> None:
        """Load first, then the data plane, then the control plane, one after the other, each
        bounded then SIGKILLed: the gateway cancels the requests the load left while every
        agent still listens, so nothing is sent to an agent already gone."""
        self.stop.set()
        deadline = time.monotonic() + 30
        for child in (self.replay, self.mix, *reversed(self.children)):
            if child is None:
                continue
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=5)
            if child is self.mix:
                time.sleep(GATEWAY_DRAIN_S)


def wan_line() -> str:
    """The banner's line on the emulated WAN and the line the topology page shows for it."""
    raw = json.loads(TOPOLOGY.read_text(encoding="utf-8"))
    wan, scale = raw["wan"], float(raw["engine"].get("payload_scale", 1.0))
    full = wan["bandwidth_gbps"] / scale
    line = f"  WAN:        a {full:g} Gbps line, {wan['rtt_ms']:g} ms RTT"
    if scale != 1.0:
        line += (
            f" (emulated at {wan['bandwidth_gbps']:g} Gbps with KV payloads at {scale:g} of "
            "their size: the same transfer times)"
        )
    return line + "; the topology page shows this line and its bytes at full size"


def _timed() -> bool:
    """Whether the plane is the roofline-timed one (the PDD mix's long prompts cost it only
    sleeps; a real CPU engine would take minutes over each)."""
    return bool(json.loads(TOPOLOGY.read_text(encoding="utf-8"))["engine"]["kind"] == "timed")


def _agent_names() -> set[str]:
    raw = json.loads(TOPOLOGY.read_text())
    return {a["id"] for a in raw["agents"]} | {"wan"}


def _drain(child: subprocess.Popen[str]) -> None:
    """Read ``pdd up``'s output to the end so it never blocks on a full pipe."""
    for _ in child.stdout or ():
        pass


def _name(child: subprocess.Popen[str]) -> str:
    """A part's name from its command line: daphne, alerts (evaluate_alerts), pdd-up."""
    args = [str(a) for a in child.args] if isinstance(child.args, list) else [str(child.args)]
    if "daphne" in args:
        return "daphne"
    if "evaluate_alerts" in args:
        return "alerts"
    return "pdd-up"


def check_port_free(host: str, port: int) -> None:
    """Fail at once, naming the port, when something already listens on it."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"run_demo: port {port} on {host} is taken ({exc.strerror}): another `make demo` "
                f"or server is running there. Stop it, or choose other ports: "
                f"make demo PORT=8010 GATEWAY_PORT=8011"
            ) from None
