"""Serializers of plans, workload profiles and the active configuration."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.core.api import StrictJsonTypes
from controlplane.planning.models import Plan, Sweep, WorkloadProfile, WorkloadSource
from controlplane.planning.selectors import scenario_names
from controlplane.planning.sweep_services import MAX_POINTS
from pdd_core.sweep import POLICY_NAMES


class WorkloadProfileSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = WorkloadProfile
        fields = (
            "id", "name", "source", "scenario", "trace_format", "requests", "stats",
            "window_start", "window_end", "created_by", "created_at",
        )  # fmt: skip
        read_only_fields = fields


class WorkloadCreateSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
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


class PlanCreateSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
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


class SweepSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A sweep's state and, once done, its table (``rows``: one object per point)."""

    progress = serializers.IntegerField(read_only=True)
    request = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = (
            "id", "status", "points", "done_points", "progress", "message", "request", "rows",
            "error", "requested_by", "created_at", "started_at", "finished_at",
        )  # fmt: skip
        read_only_fields = fields

    def get_request(self, sweep: Sweep) -> dict[str, Any]:
        """What was asked: the points in table order and the bisection steps (no TOML text)."""
        return {
            "points": sweep.inputs.get("points", []),
            "capacity_iterations": sweep.inputs.get("iterations"),
        }


class SweepCreateSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
    """Scenario fixtures by name, the policies (default all four) and optional WAN bandwidths
    (each replaces every WAN link's); one capacity search per combination."""

    scenarios = serializers.ListField(
        child=serializers.CharField(max_length=120), min_length=1, max_length=MAX_POINTS
    )
    policies = serializers.ListField(
        child=serializers.ChoiceField(choices=POLICY_NAMES),
        min_length=1,
        required=False,
        default=list(POLICY_NAMES),
    )
    wan_gbps = serializers.ListField(
        child=serializers.FloatField(min_value=0.001, max_value=100_000),
        required=False,
        default=list,
        max_length=MAX_POINTS,
    )
    capacity_iterations = serializers.IntegerField(min_value=0, max_value=8, default=3)

    def validate_scenarios(self, value: list[str]) -> list[str]:
        """Scenario fixture names, as plans take them (``fixtures/scenarios/*.toml``)."""
        known = scenario_names()
        unknown = [name for name in value if name not in known]
        if unknown:
            raise serializers.ValidationError(
                [f'"{name}" is not a valid choice (one of {", ".join(known)}).' for name in unknown]
            )
        return value
