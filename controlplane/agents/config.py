"""The configuration every agent runs: one document per role, built in one place.

It carries the active plan's routing table and pool assignment (``planning.selectors``) and,
for gateways only, the hashed tenant API keys (``billing.selectors``), so a gateway never
queries the database per request and no other role ever holds a key hash, and the SLA targets
of the operator's deployment-wide rules (``telemetry.selectors.gateway_sla``: the ones charts
and alerts use), by which the gateway marks each billed request within the SLA or not.
``version`` is the active plan's config version (0 before any plan is activated: agents keep
their local routing). A change that is not a new plan (a key created or revoked, an SLA rule
written) is pushed with the same version and a different document; agents apply any document
that differs from the one they run.
"""

from __future__ import annotations

from typing import Any

from controlplane.agents.models import AgentRole
from controlplane.billing.selectors import api_key_hashes_for_gateway
from controlplane.planning.selectors import active_config
from controlplane.telemetry.selectors import gateway_sla

NO_PLAN: dict[str, Any] = {"version": 0, "routing_table": None, "pools": []}


def current_config(*, role: str) -> dict[str, Any]:
    """``{"version", "routing_table", "pools", ...}`` (plus ``tenant_keys`` for gateways):
    what an agent of ``role`` must run now."""
    active = active_config()
    config = dict(NO_PLAN) if active is None else dict(active)
    if role == AgentRole.GATEWAY:
        config["tenant_keys"] = api_key_hashes_for_gateway()
        config["sla"] = gateway_sla()
    return config


def current_version() -> int:
    """The config version agents should run (the active plan's, 0 without one)."""
    active = active_config()
    return 0 if active is None else int(active["version"])
