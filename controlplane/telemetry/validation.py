"""Field validation of one reported request record.

Records arrive as JSON from agents (and from replays), so a DRF serializer is the parser: it
gives per-field messages the agent can log. It validates shape only; the service checks what
needs the database (does the tenant exist).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from controlplane.core.choices import HandoffMode, Pipeline
from controlplane.core.errors import flatten_detail
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


def records_parse(
    records: Sequence[Any],
) -> tuple[list[tuple[int, dict[str, Any]]], dict[int, dict[str, Any]]]:
    """Parse each record on its own: ``(index, fields)`` of the good ones, and the field
    errors of the others by index (plain strings, as the envelope carries them)."""
    valid: list[tuple[int, dict[str, Any]]] = []
    errors: dict[int, dict[str, Any]] = {}
    # One parser for the whole batch: building a serializer deep-copies its fields, which cost
    # more than the validation itself when done per record.
    parser = RequestRecordInput()
    for index, raw in enumerate(records):
        if not isinstance(raw, Mapping):
            errors[index] = {"non_field_errors": ["Each record must be a JSON object."]}
            continue
        try:
            valid.append((index, dict(parser.run_validation(raw))))
        except ValidationError as exc:
            errors[index] = flatten_detail(exc.detail)
    return valid, errors
