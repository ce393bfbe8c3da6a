"""Writes of the agent registry: register, heartbeat, acknowledge a config version; operators'
overrides of one pool's instance count (audited: rows are cleared, never deleted).

Every write checks the caller's agent token against the agent's site: a token bound to one site
cannot register, heartbeat or acknowledge for an agent of another.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.accounts.models import ApiToken
from controlplane.agents.desired import site_desired
from controlplane.agents.models import Agent, PoolOverride
from controlplane.core.exceptions import ConflictError, ForbiddenError, NotFoundError
from controlplane.core.services import validated_save
from controlplane.inventory.models import Site

logger = logging.getLogger(__name__)


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
    else:
        agent.restarts += 1
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
    state: str = "",
    pool: str = "",
) -> Agent:
    """Record liveness, the config version it runs, its stats, its rollout state and pool (blank
    when the heartbeat has none: unknown), and any outage it rode out."""
    ensure_token_site(token, agent.site)
    now = timezone.now()
    agent.last_heartbeat_at = now
    agent.stats = stats
    agent.state = state
    agent.pool = pool
    if config_version is not None:
        agent.config_version = config_version
    if unreachable_since is not None:
        agent.last_outage_started_at = unreachable_since
        agent.last_outage_ended_at = now
    agent.save(
        update_fields=[
            "last_heartbeat_at", "stats", "config_version", "last_outage_started_at",
            "last_outage_ended_at", "state", "pool",
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


def _pool_in_force(site: Site, pool: str) -> int:
    """The active version, when ``pool`` is one of ``site``'s desired pools under it."""
    desired = site_desired(site)
    if desired.version == 0:
        raise ConflictError("No plan is active: there is no desired pool to override.")
    if not desired.enacted:
        raise ConflictError(
            f"The active plan is not enacted ({desired.reason}): there is no desired pool to "
            "override."
        )
    if desired.pool(pool) is None:
        known = ", ".join(p.key for p in desired.pools) or "none"
        raise NotFoundError(
            f"Site {site.slug!r} has no pool {pool!r} under version {desired.version} "
            f"(its pools: {known})."
        )
    return desired.version


@transaction.atomic
def pool_override_set(
    *, site: Site, pool: str, instances: int, reason: str = "", set_by: str = ""
) -> PoolOverride:
    """Run ``instances`` of ``site``'s pool ``pool`` instead of the plan's count, until another
    plan is activated or the override is cleared. The version does not change: the site's
    reconciler sees the new count at its next poll. A previous override of the pool is cleared
    (kept, stamped) first."""
    version = _pool_in_force(site, pool)
    now = timezone.now()
    Site.objects.select_for_update().filter(pk=site.pk).first()  # one writer per site at a time
    PoolOverride.objects.filter(
        site=site, version=version, pool=pool, cleared_at__isnull=True
    ).update(cleared_at=now, cleared_by=set_by)
    override = validated_save(
        PoolOverride(
            site=site, version=version, pool=pool, instances=instances, reason=reason,
            set_by=set_by, set_at=now,
        )
    )  # fmt: skip
    logger.info("pool override: %s %s = %d under v%d by %s (%s)", site.slug, pool, instances,
                version, set_by or "?", reason or "no reason given")  # fmt: skip
    return override


@transaction.atomic
def pool_override_clear(*, site: Site, pool: str, cleared_by: str = "") -> int:
    """Give ``site``'s pool ``pool`` back its plan's count; the cleared row stays (audit).
    404 when no override of it is in force."""
    version = _pool_in_force(site, pool)
    cleared = PoolOverride.objects.filter(
        site=site, version=version, pool=pool, cleared_at__isnull=True
    ).update(cleared_at=timezone.now(), cleared_by=cleared_by)
    if cleared == 0:
        raise NotFoundError(f"No override of {pool!r} in site {site.slug!r} is in force.")
    logger.info("pool override cleared: %s %s under v%d by %s", site.slug, pool, version,
                cleared_by or "?")  # fmt: skip
    return cleared
