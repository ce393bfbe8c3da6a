"""Writes of the agent registry: register, heartbeat, acknowledge a config version.

Every write checks the caller's agent token against the agent's site: a token bound to one site
cannot register, heartbeat or acknowledge for an agent of another.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.accounts.models import ApiToken
from controlplane.agents.models import Agent
from controlplane.core.exceptions import ConflictError, ForbiddenError
from controlplane.core.services import validated_save
from controlplane.inventory.models import Site


def ensure_token_site(token: ApiToken | None, site: Site) -> None:
    """Refuse (403) unless ``token`` is an agent token bound to ``site``."""
    if token is None or token.site_id is None:
        raise ForbiddenError("Agent tokens must be bound to a site (create_token --site).")
    if token.site_id != site.pk:
        raise ForbiddenError(f"This token is bound to another site, not {site.slug!r}.")


@transaction.atomic
def agent_register(*, token: ApiToken | None, site: Site, data: dict[str, Any]) -> Agent:
    """Create the agent, or update it when the same name registers again (a restart)."""
    ensure_token_site(token, site)
    agent = Agent.objects.select_for_update().filter(name=data["name"]).first()
    if agent is not None and agent.site_id != site.pk:
        raise ConflictError(f"Agent {agent.name!r} is registered in site {agent.site.slug!r}.")
    if agent is None:
        agent = Agent(name=data["name"], site=site)
    for field in ("role", "address", "engine", "software_version"):
        setattr(agent, field, data.get(field, getattr(agent, field)))
    agent.registered_at = timezone.now()
    agent.last_heartbeat_at = agent.registered_at
    return validated_save(agent)


@transaction.atomic
def agent_heartbeat(
    *,
    token: ApiToken | None,
    agent: Agent,
    config_version: int | None,
    unreachable_since: datetime | None,
    stats: dict[str, Any],
) -> Agent:
    """Record liveness, the config version it runs, its stats, and any outage it rode out."""
    ensure_token_site(token, agent.site)
    now = timezone.now()
    agent.last_heartbeat_at = now
    agent.stats = stats
    if config_version is not None:
        agent.config_version = config_version
    if unreachable_since is not None:
        agent.last_outage_started_at = unreachable_since
        agent.last_outage_ended_at = now
    agent.save(
        update_fields=[
            "last_heartbeat_at", "stats", "config_version", "last_outage_started_at",
            "last_outage_ended_at",
        ]
    )  # fmt: skip
    return agent


def agent_ack_config(*, agent_id: int, version: int) -> bool:
    """Record that the agent applied ``version``; never moves an agent backwards."""
    now = timezone.now()
    updated = (
        Agent.objects.filter(pk=agent_id)
        .filter(Q(config_version__isnull=True) | Q(config_version__lte=version))
        .update(config_version=version, config_acked_at=now, last_heartbeat_at=now)
    )
    return updated == 1


def agent_touch(*, agent_id: int) -> None:
    """Any message on the config channel proves the agent is alive."""
    Agent.objects.filter(pk=agent_id).update(last_heartbeat_at=timezone.now())
