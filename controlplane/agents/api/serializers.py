"""Agent registry serializers: what agents send, and what operators read."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.agents.models import Agent, AgentRole, AgentState, PoolOverride
from controlplane.core.api import BriefRelatedField, StrictJsonTypes
from controlplane.core.parsers import DB_INT_MAX, json_problems
from controlplane.inventory.models import Site, identifier_validator
from pdd_core.agent.desired import MAX_INSTANCES, DesiredStateError, PoolSource, check_pool_key


def _pool_key(value: str) -> str:
    """A pool key's form (``pdd_core.agent.desired.check_pool_key``), as a field error."""
    try:
        return check_pool_key(value)
    except DesiredStateError as exc:
        raise serializers.ValidationError(str(exc)) from None


class RegisterSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField(max_length=100, validators=[identifier_validator])
    site = serializers.SlugRelatedField(slug_field="slug", queryset=Site.objects.all())
    role = serializers.ChoiceField(choices=AgentRole.choices)
    address = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    engine = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    software_version = serializers.CharField(
        max_length=64, required=False, allow_blank=True, default=""
    )


class HeartbeatSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
    config_version = serializers.IntegerField(
        min_value=0, max_value=DB_INT_MAX, required=False, allow_null=True
    )
    unreachable_since = serializers.DateTimeField(required=False, allow_null=True)
    stats = serializers.DictField(required=False, default=dict)
    state = serializers.ChoiceField(choices=AgentState.choices, required=False)
    pool = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")

    def validate_pool(self, value: str) -> str:
        return _pool_key(value) if value else value

    def validate_stats(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(str(value)) > 10_000:
            raise serializers.ValidationError("Too large (10,000 characters at most).")
        problem = json_problems(value)
        if problem is not None:
            raise serializers.ValidationError(f"Not storable: {problem}.")
        return value


class AgentSerializer(serializers.ModelSerializer[Agent]):
    site = BriefRelatedField(read_only=True)
    status = serializers.CharField(read_only=True)

    class Meta:
        model = Agent
        fields = [
            "id", "name", "site", "role", "address", "engine", "software_version", "status",
            "registered_at", "restarts", "last_heartbeat_at", "config_version", "config_acked_at",
            "last_outage_started_at", "last_outage_ended_at", "state", "pool", "stats",
        ]  # fmt: skip
        read_only_fields = fields


class RegisteredSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    heartbeat_interval_s = serializers.FloatField()
    config_ws = serializers.CharField()
    config_version = serializers.IntegerField()


class DesiredPoolSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """One pool of a site's desired state (``pdd_core.agent.desired.DesiredPool``)."""

    key = serializers.CharField()
    role = serializers.ChoiceField(choices=["prefill", "relay", "main"])
    chip = serializers.CharField()
    tp = serializers.IntegerField()
    pp = serializers.IntegerField()
    dp = serializers.IntegerField()
    ep = serializers.IntegerField()
    instances = serializers.IntegerField()
    engine = serializers.DictField()
    # A declared field named like Field.source: DRF's metaclass takes it out of the class body.
    source = serializers.ChoiceField(choices=[s.value for s in PoolSource])  # type: ignore[assignment]


class DesiredStateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """What a site must run (``pdd_core.agent.desired.DesiredState``); no pools: keep what runs."""

    site = serializers.CharField()
    version = serializers.IntegerField()
    plan = serializers.IntegerField(allow_null=True)
    drain_timeout_s = serializers.FloatField()
    enacted = serializers.BooleanField(
        help_text="false: the active plan's design is not one this plane's agents run; no pools"
    )
    reason = serializers.CharField(allow_blank=True, help_text="why it is not enacted, or empty")
    pools = DesiredPoolSerializer(many=True)


class PoolOverrideSetSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
    instances = serializers.IntegerField(min_value=0, max_value=MAX_INSTANCES)
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class PoolOverrideSerializer(serializers.ModelSerializer[PoolOverride]):
    site = serializers.CharField(source="site.slug", read_only=True)

    class Meta:
        model = PoolOverride
        fields = [
            "id", "site", "version", "pool", "instances", "reason", "set_by", "set_at",
            "cleared_by", "cleared_at",
        ]  # fmt: skip
        read_only_fields = fields
