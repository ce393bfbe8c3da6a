"""Run one data-plane process until SIGTERM or SIGINT: an agent of any role, or the WAN line.

``pdd agent`` and ``pdd up`` (through ``pdd agent``) call ``run_process``. A process prints
one ``ready`` line with its address once it listens, so a supervisor or a test can wait for
it with a bound instead of sleeping.

With ``ControlSettings`` (``pdd agent --control-plane URL``, token from ``PDD_CONTROL_TOKEN``)
the process also runs an ``AgentLink`` beside its role: it registers under its config id in
its site, beats, and follows the config channel. The gateway applies each version
(``Gateway.apply_control_config``) and ships its journal with a ``ReportShipper``; the other
roles acknowledge versions without changing anything (their peers and pools are fixed by the
file a ``pdd up`` plane was started from). Losing the control plane never stops serving.
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

log = logging.getLogger(__name__)


async def start_role(config: DataPlaneConfig, role: str, agent_id: str) -> tuple[Any, str]:
    """Start the process of ``role``; returns the object (with ``close``) and its address."""
    if role == "wan":
        return await start_wan(config)
    if role == "gateway":
        from pdd_core.agent.gateway import Gateway
        from pdd_core.agent.gateway_api import GatewayApi

        gateway = Gateway(config, agent_id)
        api = GatewayApi(gateway)
        await api.start()
        await gateway.start()
        host, port = api.address
        return gateway, f"http://{host}:{port}"
    agent: Any
    if role == "prefill":
        from pdd_core.agent.prefill import PrefillAgent

        agent = PrefillAgent(config, agent_id)
    elif role == "relay":
        from pdd_core.agent.relay import RelayAgent

        agent = RelayAgent(config, agent_id)
    elif role == "main":
        from pdd_core.agent.main_decode import MainDecodeAgent

        agent = MainDecodeAgent(config, agent_id)
    else:
        raise ValueError(f"role: unknown role {role!r}")
    await agent.start()
    host, port = agent.address
    return agent, f"{host}:{port}"


async def start_wan(config: DataPlaneConfig) -> tuple[Any, str]:
    """One shaped line between the sites, with a route for every agent across it."""
    from pdd_core.agent.wan import LineSettings, WanEmulator
    from pdd_core.agent.wan_control import ControlServer

    wan = config.wan
    settings = LineSettings(wan.bandwidth_gbps, wan.rtt_ms, wan.jitter_ms)
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
    control = ControlServer(emulator, token=wan.control_token, host=wan.host, port=wan.control_port)
    await control.start()

    class Line:
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
) -> list[Any]:  # fmt: skip
    """The coroutines that join this process to the control plane (link; shipper for gateway)."""
    from pdd_core import __version__
    from pdd_core.agent.control import (
        AgentIdentity,
        AgentLink,
        ControlPlaneClient,
        ReportShipper,
    )
    from pdd_core.agent.journal import JournalSource

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
        return [link.run(), shipper.run()]

    async def acknowledge(version: int, document: Mapping[str, Any]) -> None:
        log.info("config %s acknowledged (pools are fixed for this plane)", version)

    def stats() -> dict[str, Any]:
        # This journal is local only (never shipped): rotation is its normal end, not a loss.
        journal = getattr(obj, "journal", None)
        return {} if journal is None else {"local_journal_rotated_out": journal.dropped}

    link = AgentLink(
        client, identity, acknowledge, stats=stats, first_backoff_s=first, max_backoff_s=cap
    )
    return [link.run()]


def run_process(
    config: DataPlaneConfig, role: str, agent_id: str, control: ControlSettings | None = None
) -> int:
    """Serve until SIGTERM/SIGINT, then close sockets and exit 0."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        obj, address = await start_role(config, role, agent_id)
        tasks = []
        if control is not None:
            for coroutine in control_tasks(
                control, config, role, agent_id, obj=obj, address=address
            ):
                tasks.append(asyncio.create_task(coroutine))
        print(f"ready {role} {agent_id} {address}", flush=True)
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(obj.close(), 3)

    asyncio.run(main())
    return 0
