"""The membership of a ``pdd up`` plane that its sites' reconcilers change while it serves.

Mixed into ``plane.DataPlane``: the reconcilers (``reconcile``, one thread per site) adopt,
start, drain and retire agents through these methods, each of which rewrites the file
every child follows (``agent.membership``) under the plane's lock. Also here: stopping a child
(SIGTERM, then SIGKILL), and the children an earlier supervisor of the same run directory left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pdd_core.agent.config import AgentSpec, DataPlaneConfig
from pdd_core.agent.supervisor.reconcile import DesiredSource, Member, SiteReconciler
from pdd_core.agent.tls import issue


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct free ports: all sockets stay bound until every port is chosen, since
    the kernel may hand a just-released port out again (two agents got one port in CI)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def terminate(child: subprocess.Popen[Any], grace_s: float = 5.0) -> None:
    """SIGTERM a child, SIGKILL it if it still runs after ``grace_s``; reap it."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=5)


def stop_orphans(pids_path: Path, config_path: Path, grace_s: float = 5.0) -> list[int]:
    """Stop the children an earlier supervisor of this run directory left (it was killed
    outright where ``PR_SET_PDEATHSIG`` does not exist, or a child outlived it): the pids in
    ``pids_path`` still running a command that names ``config_path``. Returns them."""
    try:
        pids = [int(pid) for pid in json.loads(pids_path.read_text()).values()]
    except (OSError, ValueError, AttributeError):
        return []
    left = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone (or not Linux: nothing to find it by)
        if str(config_path).encode() in command:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            left.append(pid)
    deadline = time.monotonic() + grace_s
    for pid in left:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
    return left


class SiteMembers:
    """Adopt, start, drain and retire agents (``supervisor.DataPlane`` sets the attributes)."""

    config: DataPlaneConfig
    config_path: Path
    tls_dir: Path
    lock: threading.RLock
    children: dict[str, subprocess.Popen[str]]
    retired: set[str]
    addresses: dict[str, str]
    reconcilers: list[SiteReconciler]
    _spawn: Callable[[str, str], None]

    @property
    def gateway_url(self) -> str:  # pragma: no cover - DataPlane's
        raise NotImplementedError

    def reconcile(self, sources: Mapping[str, DesiredSource], say: Callable[[str], None]) -> None:
        """Start one reconciler per site of ``sources`` (site -> its desired state's source)."""
        for site, source in sorted(sources.items()):
            reconciler = SiteReconciler(self, site, source, say)
            self.reconcilers.append(reconciler)
            reconciler.start()

    def _write_config(self) -> None:
        """The file every child follows, replaced whole (a reader sees old or new)."""
        spare = self.config_path.with_suffix(".json.new")
        spare.write_text(json.dumps(self.config.to_dict(), indent=2))
        os.replace(spare, self.config_path)

    def _set(self, agent_id: str, **changes: Any) -> None:
        with self.lock:
            agents = tuple(
                replace(a, **changes) if a.id == agent_id else a for a in self.config.agents
            )
            self.config = replace(self.config, agents=agents)
            self._write_config()

    def members(self, site: str) -> list[Member]:
        """The site's agents (not the gateway), with their rollout state and pool."""
        with self.lock:
            return [Member(a.id, a.role, a.pool, a.state) for a in self.config.agents
                    if a.site == site and a.role != "gateway"]  # fmt: skip

    def adopt(self, agent_id: str, pool: str) -> None:
        """A running agent (one the topology started) now serves ``pool``."""
        self._set(agent_id, pool=pool)

    def mark_serving(self, agent_id: str) -> None:
        """A ready agent: gateways connect to it and route to it from now on."""
        self._set(agent_id, state="serving")

    def is_ready(self, agent_id: str) -> bool:
        """Whether ``agent_id``'s process said it listens (its ``ready`` line)."""
        return agent_id in self.addresses

    def drain(self, agent_id: str) -> None:
        """No new request goes to ``agent_id`` (the gateway reads its state from the file)."""
        self._set(agent_id, state="draining")

    def add_agent(self, role: str, site: str, pool: str) -> str:
        """Start a new agent of ``role`` in ``site`` for ``pool``: a new id, a free port (and
        a route across the line for a site beyond it), its certificate of the plane's CA, the
        plane's secrets; it is ``starting`` until the gateway reaches it."""
        with self.lock:
            prefix = {"prefill": "p", "relay": "rld", "main": "md"}[role]
            taken = {a.id for a in self.config.agents}
            number = 0
            while f"{prefix}-{number}" in taken:
                number += 1
            agent_id = f"{prefix}-{number}"
            host = self.config.wan.host
            remote = site != self.config.of_role("gateway")[0].site
            ports = free_ports(host, 2 if remote else 1)
            issue(self.tls_dir, agent_id, role, [host])
            spec = AgentSpec(agent_id, role, site, host, ports[0], state="starting", pool=pool)
            routes = dict(self.config.wan.routes)
            if remote:
                routes[agent_id] = ports[1]
            self.config = replace(
                self.config,
                agents=(*self.config.agents, spec),
                wan=replace(self.config.wan, routes=routes),
            )
            self._write_config()
            self._spawn(role, agent_id)
            return agent_id

    def retire(self, agent_id: str, *, seen_s: float = 2.0) -> None:
        """Stop a drained agent for good: ``stopped`` in the file (requests naming it still
        resolve, and resume elsewhere), and once the gateway has seen that (within
        ``seen_s``: it no longer reconnects to it) SIGTERM, SIGKILL after a grace; never
        restarted."""
        with self.lock:
            self.retired.add(agent_id)
            child = self.children.pop(agent_id, None)
        self._set(agent_id, state="stopped")
        deadline = time.monotonic() + seen_s
        while agent_id in self.gateway_health().get("states", {}):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if child is not None:
            terminate(child)

    def gateway_health(self) -> dict[str, Any]:
        """The gateway's ``/health`` (which agents it reaches, their states, what each holds);
        empty when it does not answer."""
        try:
            with urllib.request.urlopen(self.gateway_url + "/health", timeout=2) as response:
                return dict(json.loads(response.read()))
        except (OSError, ValueError, KeyError):
            return {}
