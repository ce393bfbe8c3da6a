"""Optional neighbours: the active plan (``controlplane.planning``) and the agent registry
(``controlplane.agents``). Telemetry works without them; when an app is not installed the
figures it would give are absent (plan version 0, no agents), never an error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.apps import apps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActivePlan:
    version: int
    predicted_bcr: float | None
    # The plan's pools as ``{"site", "chip", "role", "instances", "tp"}`` dicts, if it has any.
    pools: tuple[dict[str, Any], ...] | None


def _first_attr(obj: Any, *names: str) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def active_plan() -> ActivePlan | None:
    """The active plan's config version and predicted BCR, or None (no planning, no plan)."""
    if not apps.is_installed("controlplane.planning"):
        return None
    try:
        from importlib import import_module

        selectors = import_module("controlplane.planning.selectors")
        getter = _first_attr(selectors, "active_plan", "plan_active", "active_plan_get")
        plan = getter() if callable(getter) else None
    except Exception:  # a neighbour's bug must not break the dashboard
        log.exception("reading the active plan failed")
        return None
    if plan is None:
        return None
    result = getattr(plan, "result", None) or {}
    predicted = (result.get("predicted") or {}).get("bcr") if isinstance(result, dict) else None
    pools = tuple(result.get("pools") or ()) if isinstance(result, dict) else ()
    return ActivePlan(
        version=int(_first_attr(plan, "version", "config_version") or 0),
        predicted_bcr=float(predicted) if isinstance(predicted, int | float) else None,
        pools=pools or None,
    )


def agents() -> list[dict[str, Any]] | None:
    """Registered agents as ``{"name", "role", "site", "healthy", "config_version"}``, or None
    when the agents app is not installed."""
    if not apps.is_installed("controlplane.agents"):
        return None
    try:
        from importlib import import_module

        selectors = import_module("controlplane.agents.selectors")
        getter = _first_attr(selectors, "agent_list", "agents_list")
        rows = list(getter()) if callable(getter) else []
    except Exception:
        log.exception("reading the agent registry failed")
        return []
    result = []
    for a in rows:
        status = getattr(a, "status", None)
        site = getattr(a, "site", None)
        result.append(
            {
                "name": str(_first_attr(a, "name", "pk")),
                "role": str(_first_attr(a, "role") or ""),
                "site": str(getattr(site, "slug", site) or ""),
                "healthy": status == "healthy" if status is not None else False,
                "status": str(status or "unknown"),
                "config_version": _first_attr(a, "config_version"),
            }
        )
    return result


def agents_up() -> int:
    return sum(1 for a in agents() or () if a["healthy"])
