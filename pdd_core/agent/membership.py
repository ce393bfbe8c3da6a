"""Every process of a plane follows the plane's membership in its configuration file.

A site's reconciler (``pdd up``'s supervisor, ``agent.supervisor.reconcile``) starts and stops
agents while the plane serves: it rewrites the file every process was started from (atomically: a
new file renamed over the old one) with the agents it added, the state of each
(``config.AGENT_STATES``) and the WAN routes of new agents across the line. Each process polls the
file's signature every ``MEMBERS_EVERY_S`` and, when the agents or routes changed, hands the new
membership to its role's ``update_members``: the gateway opens links to new agents and stops routing
to draining ones, P and RLD resolve new peers, the WAN line opens the new routes. Only the
membership changes: a gateway's routing table and keys from the control plane stay as they were. A
file that does not parse (a hand edit) is logged once and ignored until it changes again."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from pdd_core.agent.config import ConfigError, DataPlaneConfig, load_config

log = logging.getLogger(__name__)
MEMBERS_EVERY_S = 0.25


def with_members(config: DataPlaneConfig, fresh: DataPlaneConfig) -> DataPlaneConfig:
    """``config`` with the agents and WAN routes of ``fresh`` (nothing else of it)."""
    return replace(config, agents=fresh.agents, wan=replace(config.wan, routes=fresh.wan.routes))


def same_members(config: DataPlaneConfig, fresh: DataPlaneConfig) -> bool:
    return config.agents == fresh.agents and dict(config.wan.routes) == dict(fresh.wan.routes)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


async def follow_members(
    path: Path | str,
    current: Callable[[], DataPlaneConfig],
    apply: Callable[[DataPlaneConfig], Awaitable[None]],
    *,
    every_s: float = MEMBERS_EVERY_S,
) -> None:
    """Until cancelled: when ``path`` changes and its membership differs from ``current()``'s,
    await ``apply(fresh)`` with the file's configuration."""
    path = Path(path)
    seen = _signature(path)
    while True:
        await asyncio.sleep(every_s)
        signature = _signature(path)
        if signature is None or signature == seen:
            continue
        seen = signature
        try:
            fresh = await asyncio.to_thread(load_config, path)
        except (ConfigError, OSError) as exc:
            log.warning("%s: membership not updated: %s", path, exc)
            continue
        if not same_members(current(), fresh):
            await apply(fresh)
