"""How the gateway takes a control-plane configuration version (``Gateway.apply_control_config``).

``routing_table`` (``RoutingTable`` fields; unknown keys are logged and ignored; invalid
values or null keep the current table) and ``tenant_keys`` (sha256 -> tenant) replace the
local ones in one new configuration, which the gateway swaps in with one assignment, so a
request sees the old or the new config, never a mix. The control plane is the authority on
keys once it has any: its map replaces the file's (revocations take effect). While it has none
(a fresh control plane), the file's keys stay valid, so connecting a running plane never
locks everyone out. ``pools`` are informational: a ``pdd up`` plane is fixed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pdd_core.agent.config import DataPlaneConfig
from pdd_core.routing import with_overrides

log = logging.getLogger("pdd_core.agent.gateway")


def applied(
    config: DataPlaneConfig,
    local_tenants: Mapping[str, str],
    version: int,
    document: Mapping[str, Any],
) -> DataPlaneConfig:
    """``config`` with the document's routing table and tenant keys (see the module)."""
    routing = config.routing
    table = document.get("routing_table")
    if isinstance(table, Mapping):
        try:
            routing, unknown = with_overrides(routing, table)
        except ValueError as exc:
            log.error("config %s: routing_table rejected (%s); keeping the current", version, exc)
            unknown = []
        if unknown:
            log.info("config %s: ignoring unknown routing keys %s", version, unknown)
    keys = document.get("tenant_keys")
    tenants: Mapping[str, str] = config.tenants
    if isinstance(keys, Mapping):
        given = {str(k).lower(): str(v) for k, v in keys.items()}
        tenants = given if given else local_tenants
    log.info("config %s applied: %d tenant keys", version, len(tenants))
    return replace(config, routing=routing, tenants=tenants)
