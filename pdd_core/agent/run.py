"""Run one data-plane process until SIGTERM or SIGINT: an agent of any role, or the WAN line.

``pdd agent`` and ``pdd up`` (through ``pdd agent``) call ``run_process``. A process prints
one ``ready`` line with its address once it listens, so a supervisor or a test can wait for
it with a bound instead of sleeping.

With ``ControlSettings`` (``pdd agent --control-plane URL``, token from ``PDD_CONTROL_TOKEN``)
the process also runs an ``AgentLink`` beside its role: it registers under its config id in
its site, beats, and follows the config channel. The gateway applies each version
(``Gateway.apply_control_config``) and ships its journal with a ``ReportShipper``; the other
roles acknowledge versions (a plan's pools are the site reconciler's to enact). Every heartbeat
carries the process's rollout state and pool from the plane's file (``report_rollout``), and
a last one says ``stopped``. Losing the control plane never stops serving.

Every process follows the plane's membership in its file (``agent.membership``): a site's
reconciler starts and drains agents while the plane serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.membership import follow_members, with_members

log = logging.getLogger(__name__)
# Every line of an agent's log says its level (an operator greps WARNING and ERROR), where it
# comes from and when.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


async def start_role(
    config: DataPlaneConfig, role: str, agent_id: str, *, joined: bool = False
) -> tuple[Any, str]:
    """Start the process of ``role``; returns the object (with ``close``) and its address. A
    gateway ``joined`` to a control plane starts from the control plane's last key map (saved
    beside its journal), before it takes a request."""
    if role == "wan":
        return await start_wan(config)
    if role == "gateway":
        from pdd_core.agent.gateway.api import GatewayApi
        from pdd_core.agent.gateway.server import Gateway

        gateway = Gateway(config, agent_id)
        if joined:
            gateway.restore_keys()
        api = GatewayApi(gateway)
        await api.start()
        await gateway.start()
        host, port = api.address
        return gateway, f"http://{host}:{port}"
    agent: Any
    if role == "prefill":
        from pdd_core.agent.prefill.agent import PrefillAgent

        agent = PrefillAgent(config, agent_id)
    elif role == "relay":
        from pdd_core.agent.decode.relay import RelayAgent

        agent = RelayAgent(config, agent_id)
    elif role == "main":
        from pdd_core.agent.decode.main import MainDecodeAgent

        agent = MainDecodeAgent(config, agent_id)
    else:
        raise ValueError(f"role: unknown role {role!r}")
    await agent.start()
    host, port = agent.address
    return agent, f"{host}:{port}"


async def start_wan(config: DataPlaneConfig) -> tuple[Any, str]:
    """One shaped line between the sites, with a route for every agent across it."""
    from pdd_core.agent.wan.control import ControlServer
    from pdd_core.agent.wan.emulator import LineSettings, WanEmulator

    wan = config.wan
    window = config.wan_window_wire_bytes
    settings = LineSettings(wan.bandwidth_gbps, wan.rtt_ms, wan.jitter_ms, window)
    routes = list(wan.routes.items())
    if not routes:
        raise ValueError("wan.routes: the line fronts no agent")
    first_id, first_port = routes[0]
    first = config.agent(first_id)
    emulator = WanEmulator(
        listen=(wan.host, first_port),
        upstream=(first.host, first.port),
        settings=settings,
        seed=wan.seed,
    )
    await emulator.start()
    for agent_id, port in routes[1:]:
        target = config.agent(agent_id)
        await emulator.add_route((wan.host, port), (target.host, target.port))
    from pdd_core.agent.auth import WAN_TOKEN, secret_from_env
    from pdd_core.agent.tls import TlsContexts

    token = secret_from_env(name=WAN_TOKEN).decode()  # per plane, never a default
    tls = TlsContexts.load(config.tls_dir, "wan").server  # its control endpoint: mutual TLS
    control = ControlServer(emulator, token=token, host=wan.host, port=wan.control_port, tls=tls)
    await control.start()

    class Line:
        """The line's process: its control endpoint and routes, which follow the plane's
        membership (``update_members``: a route for each agent started across the line)."""

        def __init__(self) -> None:
            self.config = config

        async def update_members(self, fresh: DataPlaneConfig) -> None:
            for agent_id, port in fresh.wan.routes.items():
                if agent_id not in self.config.wan.routes:
                    target = fresh.agent(agent_id)
                    await emulator.add_route((wan.host, int(port)), (target.host, target.port))
                    log.info("route to %s opened on port %s", agent_id, port)
            self.config = with_members(self.config, fresh)

        async def close(self) -> None:
            await control.close()
            await emulator.close()

    host, port = control.address
    return Line(), f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class ControlSettings:
    """Where the control plane is and the (site-bound) agent token to call it with."""

    url: str
    token: str
    first_backoff_s: float = 0.5
    max_backoff_s: float = 5.0


def control_tasks(
    control: ControlSettings, config: DataPlaneConfig, role: str, agent_id: str, *, obj: Any,
    address: str,
) -> tuple[list[Any], Any]:  # fmt: skip
    """The coroutines that join this process to the control plane (link; shipper for gateway),
    and its ``AgentLink``."""
    from pdd_core import __version__
    from pdd_core.agent.control import AgentIdentity, AgentLink, ControlPlaneClient
    from pdd_core.agent.journal import JournalSource
    from pdd_core.agent.shipper import ReportShipper

    gateway_site = config.of_role("gateway")[0].site
    site = gateway_site if role == "wan" else config.agent(agent_id).site
    identity = AgentIdentity(
        name=agent_id, site=site, role=role, address=address, engine=config.engine.kind,
        software_version=__version__,
    )  # fmt: skip
    client = ControlPlaneClient(control.url, control.token)
    first, cap = control.first_backoff_s, control.max_backoff_s
    if role == "gateway":
        shipper = ReportShipper(
            client, JournalSource(obj.journal), first_backoff_s=first, max_backoff_s=cap,
            dead_letter=Path(config.journal_dir) / f"{agent_id}.dead.jsonl",
        )  # fmt: skip

        def gateway_stats() -> dict[str, Any]:
            return {
                **obj.stats(),
                "records_accepted": shipper.accepted,
                "records_duplicates": shipper.duplicates,
                "records_rejected": shipper.rejected,
                "records_dead_letter": str(shipper.dead_letter),
            }

        link = AgentLink(
            client, identity, obj.apply_control_config, stats=gateway_stats,
            first_backoff_s=first, max_backoff_s=cap,
        )  # fmt: skip

        async def ship() -> None:
            # The control plane takes records only from a registered gateway: register first.
            await link.registered.wait()
            await shipper.run()

        return [link.run(), ship()], link

    async def acknowledge(version: int, document: Mapping[str, Any]) -> None:
        # The pools a plan gives are the site reconciler's to enact
        # (``agent.supervisor.reconcile``).
        log.info("config %s acknowledged", version)

    def stats() -> dict[str, Any]:
        # This journal is local only (never shipped): rotation is its normal end, not a loss.
        journal = getattr(obj, "journal", None)
        return {} if journal is None else {"local_journal_rotated_out": journal.dropped}

    link = AgentLink(
        client, identity, acknowledge, stats=stats, first_backoff_s=first, max_backoff_s=cap
    )
    return [link.run()], link


def report_rollout(link: Any, config: DataPlaneConfig, agent_id: str) -> None:
    """What this process's heartbeats say of the rollout: its state and pool in the plane's
    file (the gateway and the WAN line serve no pool: serving)."""
    spec = next((a for a in config.agents if a.id == agent_id), None)
    if spec is None or spec.role == "gateway":
        link.set_rollout("serving", "")
    else:
        link.set_rollout(spec.state, spec.pool)


async def last_heartbeat(link: Any, pool: str, timeout_s: float = 3.0) -> None:
    """One heartbeat saying ``stopped``, as the process stops (bounded: the control plane may
    be gone; it then finds the agent silent instead), within the 5 s the supervisor gives a
    stopping child before SIGKILL."""
    from pdd_core.agent.desired import RolloutState

    registration = link.registration
    if registration is None:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(
            link.client.heartbeat(
                registration.agent_id, config_version=link.config_version,
                unreachable_since=None, stats=link.stats(), state=RolloutState.STOPPED, pool=pool,
            ),
            timeout_s,
        )  # fmt: skip


def run_process(
    config: DataPlaneConfig, role: str, agent_id: str, control: ControlSettings | None = None
) -> int:
    """Serve until SIGTERM/SIGINT, then close sockets and exit 0."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        obj, address = await start_role(config, role, agent_id, joined=control is not None)
        tasks = []
        link = None
        if control is not None:
            coroutines, link = control_tasks(
                control, config, role, agent_id, obj=obj, address=address
            )
            tasks += [asyncio.create_task(coroutine) for coroutine in coroutines]
            report_rollout(link, config, agent_id)

        async def members(fresh: DataPlaneConfig) -> None:
            await obj.update_members(fresh)
            if link is not None:
                report_rollout(link, fresh, agent_id)

        if config.path:  # a site's reconciler may start and drain agents: follow the file
            tasks.append(asyncio.create_task(follow_members(config.path, lambda: obj.config,
                                                            members)))  # fmt: skip
        print(f"ready {role} {agent_id} {address}", flush=True)
        await stop.wait()
        # Already stopping: a second SIGTERM (the supervisor's, and the parent-death signal
        # when the thread that spawned this process ends) must neither kill the shutdown nor
        # reach asyncio's wakeup pipe once the loop has closed it (a BrokenPipeError traceback).
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
            signal.signal(sig, signal.SIG_IGN)
        if link is not None:
            await last_heartbeat(link, next((a.pool for a in obj.config.agents
                                             if a.id == agent_id), ""))  # fmt: skip
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(obj.close(), 3)

    asyncio.run(main())
    return 0
