"""Field validation of one reported request record.

Records arrive as JSON from agents (and from replays), so a DRF serializer is the parser: it
gives per-field messages the agent can log. It validates shape only; the service checks what
needs the database (does the tenant exist).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.core.choices import HandoffMode, Pipeline
from controlplane.inventory.models import identifier_validator


class RequestRecordInput(serializers.Serializer):  # type: ignore[type-arg]
    """One request as an agent reports it (``input_tokens = hit_tokens + miss_tokens``)."""

    request_id = serializers.RegexField(r"^[A-Za-z0-9._:-]{1,128}$")
    tenant = serializers.CharField(max_length=64, validators=[identifier_validator])
    api_key_prefix = serializers.RegexField(
        r"^[a-f0-9]{1,16}$", required=False, allow_blank=True, default=""
    )
    model = serializers.CharField(max_length=64, validators=[identifier_validator])
    site = serializers.CharField(max_length=64, validators=[identifier_validator])
    pipeline = serializers.ChoiceField(choices=Pipeline.choices)
    arrival_time = serializers.DateTimeField()
    finish_time = serializers.DateTimeField()
    input_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    hit_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    miss_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    output_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    ttft_s = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)
    tpot_s = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)
    wan_bytes = serializers.IntegerField(min_value=0, max_value=2**63 - 1, default=0)
    handoff_mode = serializers.ChoiceField(
        choices=HandoffMode.choices, required=False, allow_blank=True, default=""
    )
    rld_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    md_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    sla_met = serializers.BooleanField()
    rejected = serializers.BooleanField(default=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["hit_tokens"] + attrs["miss_tokens"] != attrs["input_tokens"]:
            raise serializers.ValidationError(
                {"input_tokens": "Must equal hit_tokens + miss_tokens."}
            )
        if attrs["finish_time"] < attrs["arrival_time"]:
            raise serializers.ValidationError({"finish_time": "Must not be before arrival_time."})
        return attrs
