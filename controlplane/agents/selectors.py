"""Reads of the agent registry, with the rollout of the current config version."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from controlplane.agents.models import Agent, AgentRole, AgentStatus
from controlplane.telemetry.integrations import AgentRow


def agent_list() -> QuerySet[Agent]:
    return Agent.objects.select_related("site")


def _count(stats: Any, name: str) -> int | None:
    """A non-negative integer a heartbeat reported under ``name``, else None."""
    value = stats.get(name) if isinstance(stats, dict) else None
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def agent_rows() -> list[AgentRow]:
    """Every agent as telemetry's dashboard lists it (see ``apps.ready``)."""
    return [
        AgentRow(name=a.name, role=a.role, site=a.site.slug, status=a.status,
                 config_version=a.config_version, address=a.address,
                 registered_at=a.registered_at, last_heartbeat_at=a.last_heartbeat_at,
                 restarts=a.restarts, records_rejected=_count(a.stats, "records_rejected"),
                 state=a.state, pool=a.pool)
        for a in agent_list()
    ]  # fmt: skip


def site_gateways(site: str) -> frozenset[str]:
    """The names of the gateway agents registered in ``site``: the only agents whose records
    ingestion accepts (the gateway's record of a request is the complete one)."""
    names = Agent.objects.filter(site__slug=site, role=AgentRole.GATEWAY).values_list(
        "name", flat=True
    )
    return frozenset(names)


# Warn when less than this share of an agent's journal budget is left: records it has not
# shipped would be dropped once the rest fills (pdd_core.agent.journal).
JOURNAL_WARN_SHARE = 0.25


@dataclass(frozen=True)
class JournalWarning:
    """An agent whose journal is close to dropping records it has not shipped yet."""

    agent: str
    site: str
    remaining_bytes: int
    budget_bytes: int

    @property
    def remaining_share(self) -> float:
        return self.remaining_bytes / self.budget_bytes


def journal_warnings() -> list[JournalWarning]:
    """Agents whose last heartbeat reports less than ``JOURNAL_WARN_SHARE`` of their journal's
    disk budget left (``journal_budget_remaining_bytes`` of ``journal_budget_bytes``)."""
    warnings = []
    for agent in agent_list():
        remaining = agent.stats.get("journal_budget_remaining_bytes")
        budget = agent.stats.get("journal_budget_bytes")
        if not isinstance(remaining, int) or not isinstance(budget, int) or budget <= 0:
            continue
        if remaining < JOURNAL_WARN_SHARE * budget:
            warnings.append(JournalWarning(agent.name, agent.site.slug, remaining, budget))
    return warnings


def agents_with_status(queryset: QuerySet[Agent], status: str) -> QuerySet[Agent]:
    """Filter by derived status in the database (the thresholds are the model's)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.AGENT_STALE_AFTER_S)
    dead = now - timedelta(seconds=settings.AGENT_DEAD_AFTER_S)
    if status == AgentStatus.HEALTHY:
        return queryset.filter(last_heartbeat_at__gte=stale)
    if status == AgentStatus.STALE:
        return queryset.filter(last_heartbeat_at__lt=stale, last_heartbeat_at__gte=dead)
    return queryset.exclude(last_heartbeat_at__gte=dead)


def rollout(current_version: int) -> dict[str, Any]:
    """How many agents run the current config version, per status."""
    agents = list(agent_list())
    on_current = [a for a in agents if a.config_version == current_version]
    return {
        "version": current_version,
        "agents": len(agents),
        "on_current_version": len(on_current),
        "healthy": sum(a.status == AgentStatus.HEALTHY for a in agents),
        "healthy_on_current_version": sum(a.status == AgentStatus.HEALTHY for a in on_current),
    }
