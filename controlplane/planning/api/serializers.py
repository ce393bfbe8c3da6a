"""Serializers of plans, workload profiles and the active configuration."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.planning.models import Plan, WorkloadProfile, WorkloadSource
from controlplane.planning.selectors import scenario_names


class WorkloadProfileSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = WorkloadProfile
        fields = (
            "id", "name", "source", "scenario", "trace_format", "requests", "stats",
            "window_start", "window_end", "created_by", "created_at",
        )  # fmt: skip
        read_only_fields = fields


class WorkloadCreateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """One of: ``file`` (a trace upload, multipart), ``scenario`` (a fixture's workload), or
    ``telemetry_minutes`` (the last N minutes of live telemetry)."""

    name = serializers.CharField(max_length=120)
    file = serializers.FileField(required=False)
    scenario = serializers.ChoiceField(choices=[], required=False)
    telemetry_minutes = serializers.IntegerField(required=False, min_value=1, max_value=24 * 60)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scenario = self.fields["scenario"]
        assert isinstance(scenario, serializers.ChoiceField)
        scenario.choices = scenario_names()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [k for k in ("file", "scenario", "telemetry_minutes") if k in attrs]
        if len(given) != 1:
            raise serializers.ValidationError(
                "Give exactly one of file, scenario or telemetry_minutes."
            )
        attrs["source"] = {
            "file": WorkloadSource.TRACE,
            "scenario": WorkloadSource.SCENARIO,
            "telemetry_minutes": WorkloadSource.TELEMETRY,
        }[given[0]]
        return attrs


class PlanSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    # null for a plan of a scenario's own workload: the schema must say so
    workload: serializers.PrimaryKeyRelatedField[WorkloadProfile] = (
        serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    )

    class Meta:
        model = Plan
        fields = (
            "id", "scenario", "workload", "status", "progress", "message", "result", "error",
            "requested_by", "version", "active", "activated_by", "activated_at",
            "archived_at", "created_at", "started_at", "finished_at",
        )  # fmt: skip
        read_only_fields = fields


class PlanCreateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    scenario = serializers.ChoiceField(choices=[])
    workload: serializers.PrimaryKeyRelatedField[WorkloadProfile] = (
        serializers.PrimaryKeyRelatedField(
            queryset=WorkloadProfile.objects.all(), required=False, allow_null=True
        )
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scenario = self.fields["scenario"]
        assert isinstance(scenario, serializers.ChoiceField)
        scenario.choices = scenario_names()


class PlanAcceptedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    status = serializers.CharField()
    url = serializers.CharField()


class ActiveConfigSerializer(serializers.Serializer):  # type: ignore[type-arg]
    version = serializers.IntegerField()
    plan = serializers.IntegerField()
    activated_at = serializers.DateTimeField()
    model = serializers.CharField()
    routing_table = serializers.DictField()
    pools = serializers.ListField(child=serializers.DictField())
