"""``pdd up``'s engine: start a whole data plane on loopback and stop it without orphans.

It reads a topology file (a data-plane configuration whose ports may be 0), picks free ports,
puts a WAN-emulator route in front of every agent outside the gateway's site, issues a fresh
API key for the ``demo`` tenant, writes the resolved configuration into a run directory and
starts one ``pdd agent`` child per agent plus the line. Children are started with
``PR_SET_PDEATHSIG`` (Linux) so they die with the supervisor even if it is killed outright;
``stop`` sends SIGTERM, waits a bounded time, then SIGKILLs what is left.

Given a control-plane URL and agent tokens (one for every site, or one per site since agent
tokens are site-bound), every child registers with the control plane (``pdd agent
--control-plane``; the token travels in the child's environment, not its command line).
Every plane gets a fresh shared secret (``agent.auth``) in ``RUN_DIR/plane.secret`` (0600),
named to the children by ``PDD_PLANE_SECRET_FILE``: agents refuse a HELLO without its proof;
and a fresh token for the WAN line's control endpoint in ``RUN_DIR/wan.token`` (0600, named
to the line by ``PDD_WAN_TOKEN_FILE``): nothing prints it and no default exists. Every plane
gets its own CA too (``agent.tls``), made with ``cryptography`` in ``RUN_DIR/tls`` with a
certificate for each agent, the WAN line and an ``operator`` client of the line's control
endpoint (keys 0600), named to the children by ``PDD_TLS_DIR``: every connection between the
agents is TLS with both ends' certificates checked.

``reconcile`` starts one reconciler per site (``supervisor.reconcile``): it brings the site's
agents to its desired state (the control plane's, or a file's) through ``supervisor.members``, which
rewrites ``RUN_DIR/dataplane.json``, the file every child follows (``agent.membership``).
``RUN_DIR/children.json`` lists the children's pids, so a supervisor started again on the same
run directory stops any an earlier one left behind.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pdd_core.agent.auth import SECRET_ENV, WAN_TOKEN, new_secret_file, read_secret_file
from pdd_core.agent.config import DataPlaneConfig, load_config
from pdd_core.agent.supervisor.members import SiteMembers, free_ports, stop_orphans
from pdd_core.agent.supervisor.reconcile import SiteReconciler
from pdd_core.agent.tls import OPERATOR, TLS_DIR_ENV, TlsContexts, issue_plane
from pdd_core.agent.wan.control import control_request
from pdd_core.keys import hash_key

WAN_TOKEN_FILE = "wan.token"  # in the run directory, beside plane.secret
START_ORDER = ("main", "relay", "prefill", "wan", "gateway")
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
STABLE_S = 30.0


def resolve(config: DataPlaneConfig, run_dir: Path) -> tuple[DataPlaneConfig, str]:
    """Ports for every agent, WAN routes for the remote site, a demo key; returns (config, key)."""
    gateway_site = config.of_role("gateway")[0].site
    remote = [a for a in config.agents if a.site != gateway_site]
    spare = iter(free_ports(config.wan.host, len(config.agents) + 1 + len(remote)))
    ports = {a.id: a.port or next(spare) for a in config.agents}
    ports["wan-control"] = config.wan.control_port or next(spare)
    routes = {a.id: int(config.wan.routes.get(a.id, 0)) or next(spare) for a in remote}
    key = "pdd-demo-" + secrets.token_hex(16)
    tenants = dict(config.tenants)
    tenants[hash_key(key)] = "demo"
    journal = config.journal_dir
    if not os.path.isabs(journal):
        journal = str(run_dir / "journal")
    resolved = replace(config.with_ports(ports, routes), tenants=tenants, journal_dir=journal)
    return resolved, key


def plane_credentials(config: DataPlaneConfig, run_dir: Path) -> tuple[Path, Path]:
    """A fresh plane's shared secret (``RUN_DIR/plane.secret``, 0600) and its CA with a
    certificate for every agent, the WAN line and the ``operator`` client (``RUN_DIR/tls``):
    what a child finds through ``SECRET_ENV`` and ``TLS_DIR_ENV``. Returns both paths."""
    secret = new_secret_file(run_dir / "plane.secret")
    tls_dir = run_dir / "tls"
    issue_plane(tls_dir, [(a.id, a.role, a.host) for a in config.agents], config.wan.host)
    return secret, tls_dir


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class DataPlane(SiteMembers):
    """The children of one ``pdd up``: start, wait for each to be ready, stop them all."""

    def __init__(
        self,
        topology: Path | str,
        run_dir: Path | str,
        *,
        control_plane: str | None = None,
        tokens: Mapping[str, str] | None = None,
    ) -> None:
        """``tokens`` maps a site to its agent token; the key ``""`` serves every other site."""
        self.control_plane = control_plane
        self.tokens = dict(tokens or {})
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config, self.api_key = resolve(load_config(topology), self.run_dir)
        self.config_path = self.run_dir / "dataplane.json"
        self.pids_path = self.run_dir / "children.json"
        stop_orphans(self.pids_path, self.config_path)
        self.config_path.write_text(json.dumps(self.config.to_dict(), indent=2))
        # The agents' shared secret: a fresh one per plane, in a file only its owner reads;
        # children find it through the environment (never argv, which ps shows).
        self.secret_path, self.tls_dir = plane_credentials(self.config, self.run_dir)
        self.wan_token_path = new_secret_file(self.run_dir / WAN_TOKEN_FILE)
        self.children: dict[str, subprocess.Popen[str]] = {}
        self.retired: set[str] = set()  # stopped on purpose (drained): never restarted
        self.reconcilers: list[SiteReconciler] = []
        # One lock over the membership (the file every child follows) and the children, which
        # the restart loop and the sites' reconcilers change from their own threads.
        self.lock = threading.RLock()
        self.roles: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self.restarts: dict[str, int] = {}
        self._ready: queue.Queue[tuple[str, str]] = queue.Queue()
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        if control_plane:
            sites = {a.site for a in self.config.agents}
            missing = sorted(s for s in sites if s not in self.tokens and "" not in self.tokens)
            if missing:
                raise ValueError(f"agent tokens: none for site(s) {', '.join(missing)}")

    def site_of(self, role: str, agent_id: str) -> str:
        """An agent's site; the WAN line registers in the gateway's site."""
        if role == "wan":
            return self.config.of_role("gateway")[0].site
        return self.config.agent(agent_id).site

    @property
    def gateway_url(self) -> str:
        return self.addresses[self.config.of_role("gateway")[0].id]

    @property
    def wan_control(self) -> tuple[str, int]:
        return self.config.wan.host, self.config.wan.control_port

    @property
    def wan_token(self) -> str:
        """The WAN line's control token (tests, demos; an operator reads the file)."""
        return read_secret_file(self.wan_token_path, WAN_TOKEN).decode()

    def wan_request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Call the WAN line's control endpoint as its operator (the token and the
        ``operator`` certificate of this plane)."""
        tls = TlsContexts.load(self.tls_dir, OPERATOR).client
        call = control_request(self.wan_control, self.wan_token, method, path, body, tls=tls)
        return asyncio.run(call)

    def start(self, timeout_s: float = 60.0) -> None:
        """Start every child in dependency order; raises ``RuntimeError`` if one fails to start."""
        deadline = time.monotonic() + timeout_s
        try:
            for role in START_ORDER:
                ids = ["wan"] if role == "wan" else [a.id for a in self.config.of_role(role)]
                for agent_id in ids:
                    self._spawn(role, agent_id)
                self._await_ready(ids, deadline)
            self._await_gateway(deadline)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, role: str, agent_id: str) -> None:
        self.roles[agent_id] = role
        log = (self.run_dir / f"{agent_id}.log").open("a")
        command = [
            sys.executable,
            "-m",
            "pdd_core",
            "agent",
            "--role",
            role,
            "--id",
            agent_id,
            "--config",
            str(self.config_path),
        ]
        env = dict(os.environ)
        env[SECRET_ENV] = str(self.secret_path)
        env[TLS_DIR_ENV] = str(self.tls_dir)
        env.pop(WAN_TOKEN, None)
        if role == "wan":
            env[f"{WAN_TOKEN}_FILE"] = str(self.wan_token_path)
        if self.control_plane:
            site = self.site_of(role, agent_id)
            command += ["--control-plane", self.control_plane, "--log-level", "INFO"]
            env["PDD_CONTROL_TOKEN"] = self.tokens.get(site, self.tokens.get("", ""))
        child = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
            # Runs before exec in the child; the watcher threads start only after the fork.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        self.children[agent_id] = child
        self.pids_path.write_text(json.dumps(self.pids()))

        def watch() -> None:
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("ready "):
                    self.addresses[agent_id] = line.split()[-1]
                    self._ready.put((agent_id, line.split()[-1]))

        threading.Thread(target=watch, daemon=True).start()

    def _await_ready(self, ids: list[str], deadline: float) -> None:
        waiting = set(ids)
        while waiting:
            for agent_id in waiting:
                code = self.children[agent_id].poll()
                if code is not None:
                    raise RuntimeError(f"{agent_id} exited with {code}; see {self.run_dir}")
            try:
                agent_id, address = self._ready.get(
                    timeout=max(0.01, min(0.2, deadline - time.monotonic()))
                )
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not ready in time: {sorted(waiting)}") from None
                continue
            self.addresses[agent_id] = address
            waiting.discard(agent_id)

    def _await_gateway(self, deadline: float) -> None:
        """Until the gateway reaches every agent (it reconnects each second)."""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.gateway_url + "/health", timeout=2) as response:
                    agents = json.loads(response.read())["agents"]
                if all(agents.values()):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the gateway did not reach every agent in time")

    def pids(self) -> dict[str, int]:
        return {agent_id: child.pid for agent_id, child in self.children.items()}

    def supervise(self, say: Callable[[str], None] = print) -> None:
        """Restart any child that exits, with backoff, in a background thread, saying so.

        The first restart comes ``FIRST_BACKOFF_S`` after the exit and each quick death
        doubles the delay (up to ``MAX_BACKOFF_S``); a child that lived ``STABLE_S`` starts
        over. A restarted agent keeps its address, so its peers reconnect on their own.
        """
        if self._supervisor is None:
            self._supervisor = threading.Thread(target=self._supervise, args=(say,), daemon=True)
            self._supervisor.start()

    def _supervise(self, say: Callable[[str], None]) -> None:
        backoff: dict[str, float] = {}
        started = {agent_id: time.monotonic() for agent_id in self.children}
        while not self._stopping.wait(0.1):
            for agent_id, child in list(self.children.items()):
                code = child.poll()
                if code is None or self._stopping.is_set() or agent_id in self.retired:
                    continue
                if agent_id != "wan" and self.config.agent(agent_id).state == "draining":
                    self.retire(agent_id)  # died while draining: its drain is over
                    say(f"pdd up: {agent_id} exited with {code} while draining; not restarted")
                    continue
                lived = time.monotonic() - started.get(agent_id, 0.0)
                delay = FIRST_BACKOFF_S if lived > STABLE_S else backoff.get(agent_id, 0.0)
                delay = min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, delay))
                backoff[agent_id] = delay * 2
                self.restarts[agent_id] = self.restarts.get(agent_id, 0) + 1
                say(
                    f"pdd up: {agent_id} exited with {code}; restarting in {delay:.1f} s "
                    f"(restart {self.restarts[agent_id]})"
                )
                if self._stopping.wait(delay):
                    return
                with self.lock:
                    if agent_id in self.retired:
                        continue
                    self._spawn(self.roles[agent_id], agent_id)
                started[agent_id] = time.monotonic()
                say(f"pdd up: {agent_id} restarted (pid {self.children[agent_id].pid})")

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM every child, wait up to ``grace_s``, SIGKILL the rest; reap them all."""
        self._stopping.set()
        for reconciler in self.reconcilers:
            reconciler.stop()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in self.children.values():
            try:
                child.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=5)

    def kill(self, agent_id: str) -> None:
        """SIGKILL one child (tests: a dead agent must not hang the gateway)."""
        child = self.children[agent_id]
        child.kill()
        child.wait(timeout=5)
