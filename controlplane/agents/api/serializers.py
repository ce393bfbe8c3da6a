"""Agent registry serializers: what agents send, and what operators read."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.agents.models import Agent, AgentRole
from controlplane.core.api import BriefRelatedField
from controlplane.core.parsers import DB_INT_MAX, json_problems
from controlplane.inventory.models import Site, identifier_validator


class RegisterSerializer(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField(max_length=100, validators=[identifier_validator])
    site = serializers.SlugRelatedField(slug_field="slug", queryset=Site.objects.all())
    role = serializers.ChoiceField(choices=AgentRole.choices)
    address = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    engine = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    software_version = serializers.CharField(
        max_length=64, required=False, allow_blank=True, default=""
    )


class HeartbeatSerializer(serializers.Serializer):  # type: ignore[type-arg]
    config_version = serializers.IntegerField(
        min_value=0, max_value=DB_INT_MAX, required=False, allow_null=True
    )
    unreachable_since = serializers.DateTimeField(required=False, allow_null=True)
    stats = serializers.DictField(required=False, default=dict)

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
            "registered_at", "last_heartbeat_at", "config_version", "config_acked_at",
            "last_outage_started_at", "last_outage_ended_at", "stats",
        ]  # fmt: skip
        read_only_fields = fields


class RegisteredSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    heartbeat_interval_s = serializers.FloatField()
    config_ws = serializers.CharField()
    config_version = serializers.IntegerField()
