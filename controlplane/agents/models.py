"""The agent registry: which data-plane processes exist, where, and what config they run.

Agents never touch the database; they register and heartbeat over REST and hold a WebSocket for
configuration. Health is derived from the last heartbeat (see ``status``), never stored, so it
cannot go stale itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from controlplane.inventory.models import Site, identifier_validator
from pdd_core.agent.config import ProcessRole
from pdd_core.agent.desired import MAX_INSTANCES, MAX_POOL_KEY, RolloutState


class AgentRole(models.TextChoices):
    """``pdd_core.agent.config.ProcessRole``, with labels."""

    GATEWAY = ProcessRole.GATEWAY.value, "Gateway"
    PREFILL = ProcessRole.PREFILL.value, "Prefill (P)"
    RELAY = ProcessRole.RELAY.value, "Relay decode (RLD)"
    MAIN = ProcessRole.MAIN.value, "Main decode (MD)"
    WAN = ProcessRole.WAN.value, "WAN link emulator"


class AgentState(models.TextChoices):
    """``pdd_core.agent.desired.RolloutState``, with labels (blank: not reported)."""

    STARTING = RolloutState.STARTING.value, "Starting"
    SERVING = RolloutState.SERVING.value, "Serving"
    DRAINING = RolloutState.DRAINING.value, "Draining"
    STOPPED = RolloutState.STOPPED.value, "Stopped"


class AgentStatus(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    STALE = "stale", "Stale"
    DEAD = "dead", "Dead"


def status_at(last_heartbeat_at: datetime | None, now: datetime) -> str:
    """healthy within ``AGENT_STALE_AFTER_S`` of the last heartbeat, stale until
    ``AGENT_DEAD_AFTER_S``, dead after (and before any heartbeat)."""
    if last_heartbeat_at is None:
        return AgentStatus.DEAD.value
    age = now - last_heartbeat_at
    if age <= timedelta(seconds=settings.AGENT_STALE_AFTER_S):
        return AgentStatus.HEALTHY.value
    if age <= timedelta(seconds=settings.AGENT_DEAD_AFTER_S):
        return AgentStatus.STALE.value
    return AgentStatus.DEAD.value


class Agent(models.Model):
    """One data-plane process (gateway, P, RLD, MD or WAN emulator) in one site.

    ``name`` is the agent's stable identity: re-registering under the same name (a restart)
    updates the row instead of adding one and counts a restart (``restarts``; ``registered_at``
    is the latest start, so uptime is the time since it), so an agent that crash-loops faster
    than the stale threshold shows its restarts while its health still reads healthy.
    ``config_version`` is the version the agent last
    acknowledged as applied; ``last_outage_*`` record the latest period an agent reports having
    served on its last config while the control plane was unreachable. ``state`` and ``pool``
    are the rollout state and pool key of its last heartbeat (blank when it did not report
    them: an older agent, or one outside any pool).
    """

    name = models.CharField(max_length=100, unique=True, validators=[identifier_validator])
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="agents")
    role = models.CharField(max_length=8, choices=AgentRole.choices)
    address = models.CharField(max_length=255, blank=True, help_text="host:port it serves on")
    engine = models.CharField(max_length=64, blank=True)
    software_version = models.CharField(max_length=64, blank=True)
    registered_at = models.DateTimeField(default=timezone.now, help_text="its latest start")
    restarts = models.PositiveIntegerField(
        default=0, help_text="registrations after the first (each start of a known name)"
    )
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    config_version = models.PositiveIntegerField(null=True, blank=True)
    config_acked_at = models.DateTimeField(null=True, blank=True)
    last_outage_started_at = models.DateTimeField(null=True, blank=True)
    last_outage_ended_at = models.DateTimeField(null=True, blank=True)
    stats = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=8, choices=AgentState.choices, blank=True)
    pool = models.CharField(max_length=MAX_POOL_KEY, blank=True, help_text="its pool key")

    class Meta:
        ordering = ["site__slug", "role", "name"]
        indexes = [models.Index(fields=["last_heartbeat_at"], name="agent_heartbeat_idx")]

    def __str__(self) -> str:
        return str(self.name)

    @property
    def status(self) -> str:
        return status_at(self.last_heartbeat_at, timezone.now())


class PoolOverride(models.Model):
    """An operator's instance count for one pool of one site under one config version.

    It replaces the plan's count in that site's desired state while that version is active, and
    lapses when another plan is activated (a new version). Rows are never deleted: clearing an
    override stamps ``cleared_at``/``cleared_by``, and a new count for the same pool clears the
    previous row first, so the rows are the audit trail of who asked for what and when.
    """

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="pool_overrides")
    version = models.PositiveIntegerField(help_text="the config version it applies to")
    pool = models.CharField(max_length=MAX_POOL_KEY, help_text="pool key")
    instances = models.PositiveIntegerField()
    reason = models.CharField(max_length=200, blank=True)
    set_by = models.CharField(max_length=150, blank=True)
    set_at = models.DateTimeField(default=timezone.now)
    cleared_by = models.CharField(max_length=150, blank=True)
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-set_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "version", "pool"],
                condition=models.Q(cleared_at__isnull=True),
                name="pool_override_one_in_force",
            ),
            models.CheckConstraint(
                condition=models.Q(instances__lte=MAX_INSTANCES),
                name="pool_override_instances_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.site_id}:{self.pool} = {self.instances} (v{self.version})"
