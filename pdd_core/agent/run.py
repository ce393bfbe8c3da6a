"""Run one data-plane process until SIGTERM or SIGINT: an agent of any role, or the WAN line.

``pdd agent`` and ``pdd up`` (through ``pdd agent``) call ``run_process``. A process prints
one ``ready`` line with its address once it listens, so a supervisor or a test can wait for
it with a bound instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
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


def run_process(config: DataPlaneConfig, role: str, agent_id: str) -> int:
    """Serve until SIGTERM/SIGINT, then close sockets and exit 0."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        obj, address = await start_role(config, role, agent_id)
        print(f"ready {role} {agent_id} {address}", flush=True)
        await stop.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(obj.close(), 3)

    asyncio.run(main())
    return 0
