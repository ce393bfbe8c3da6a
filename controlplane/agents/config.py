"""The configuration every agent runs: one versioned document, built in one place.

It carries the active plan's routing table and pool assignment (the planning app) and the
hashed tenant API keys (the billing app), so a gateway never queries the database per request.
Version 0 means no plan has been activated yet; agents then keep their local configuration.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps

from controlplane.billing.selectors import api_key_hashes_for_gateway

CONFIG_GROUP = "config.all"


def _active_plan_config() -> dict[str, Any]:
    if not apps.is_installed("controlplane.planning"):
        return {"version": 0, "routing_table": None, "pools": []}
    from controlplane.planning import selectors as planning  # type: ignore[import-not-found,unused-ignore]

    active = planning.active_config()
    if active is None:
        return {"version": 0, "routing_table": None, "pools": []}
    return dict(active)


def current_config() -> dict[str, Any]:
    """``{"version", "routing_table", "pools", "tenant_keys"}``: what agents must run now."""
    config = _active_plan_config()
    config["tenant_keys"] = api_key_hashes_for_gateway()
    return config
