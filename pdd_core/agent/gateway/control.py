"""How the gateway takes a control-plane configuration version (``Gateway.apply_control_config``).

``routing_table`` (``RoutingTable`` fields; unknown keys are logged and ignored; invalid
values or null keep the current table), ``tenant_keys`` (sha256 -> tenant) and ``sla`` (the
four ``SLA`` targets in seconds: the operator's deployment-wide rules, the same figures the
control plane's charts and alerts judge by, so a request the gateway bills as within the SLA
is judged by the targets the operator watches; an invalid or partial one is logged and the
current targets kept) replace the local ones in one new configuration, which the gateway swaps
in with one assignment, so a request sees the old or the new config, never a mix. The control
plane is the authority on keys once it has any: its map replaces the file's (revocations take
effect). While it has none (a fresh control plane), the file's keys stay valid, so connecting a
running plane never locks everyone out. ``pools`` are informational: a ``pdd up`` plane is fixed.

The control plane's last key map survives a restart: the gateway writes it (SHA-256 digests
only, as the control plane sends them) beside its journal, readable by its owner only
(``save_keys``), and a gateway that joins a control plane starts from it (``load_keys``) until
the control plane answers again. Without it, a gateway restarted while the control plane is
down would refuse every control-plane key and take again the file's keys the control plane
had replaced.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import fields, replace
from math import isfinite
from pathlib import Path
from typing import Any

from pdd_core.agent.config import DataPlaneConfig
from pdd_core.routing import with_overrides
from pdd_core.specs import SLA

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
    sla = _sla(config.sla, version, document.get("sla"))
    log.info("config %s applied: %d tenant keys", version, len(tenants))
    return replace(config, routing=routing, tenants=tenants, sla=sla)


def _sla(current: SLA, version: int, given: object) -> SLA:
    """The document's SLA targets, or ``current`` when it has none or an invalid one."""
    if given is None:
        return current
    names = {f.name for f in fields(SLA)}
    if not isinstance(given, Mapping) or set(given) != names:
        log.error(
            "config %s: sla must give exactly %s; keeping the current", version, sorted(names)
        )
        return current
    values = {}
    for name in sorted(names):
        value = given[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not isfinite(value):
            log.error(
                "config %s: sla.%s is not a finite number; keeping the current", version, name
            )
            return current
        values[name] = float(value)
    try:
        return SLA(**values)
    except ValueError as exc:
        log.error("config %s: sla rejected (%s); keeping the current", version, exc)
        return current


def keys_path(journal_dir: str, agent_id: str) -> Path:
    """Where a gateway keeps the control plane's last key map: beside its journal."""
    return Path(journal_dir) / f"{agent_id}.keys.json"


def save_keys(path: Path, version: int, keys: Mapping[str, str]) -> None:
    """Write the key map (digest -> tenant) atomically, 0600: a crash leaves the old file or
    the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"version": version, "tenant_keys": dict(keys)}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def load_keys(path: Path) -> tuple[int, dict[str, str]] | None:
    """The saved ``(version, key map)``, or None (no file yet, or one not to be trusted: readable
    by others, or malformed; logged)."""
    try:
        mode = path.stat().st_mode
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.error("%s: cannot read the saved key map (%s); ignoring it", path, exc)
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.error("%s: readable by others; ignoring the saved key map", path)
        return None
    keys, version = raw.get("tenant_keys") if isinstance(raw, dict) else None, raw.get("version")
    if (
        not isinstance(keys, dict)
        or not isinstance(version, int)
        or not all(
            isinstance(k, str) and len(k) == 64 and isinstance(v, str) for k, v in keys.items()
        )
    ):
        log.error("%s: not a saved key map; ignoring it", path)
        return None
    return version, {k.lower(): v for k, v in keys.items()}
