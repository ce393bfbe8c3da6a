"""Field validation of one reported request record: a fast parser, and the DRF serializer.

Records arrive as JSON from agents (and from replays). Two parsers share one set of rules:

- ``RecordFast`` (msgspec) takes the hot path. It accepts only the plain, canonical form of a
  good record (exact types, no whitespace to trim, aware timestamps) and costs a few
  microseconds per record;
- ``RequestRecordInput`` (DRF) is the reference and the OpenAPI schema. Every record the fast
  parser does not accept is parsed again by it, so a bad record gets DRF's per-field messages
  and a record in a lenient form that DRF accepts (``"12"`` for 12, ``" acme"``) is still kept.

So the fast parser must never accept what the serializer refuses, nor parse a value
differently: ``tests/controlplane/telemetry/test_validation.py`` holds the two to that. Both
apply ``cross_field_errors``. It validates shape only; ``bounds`` checks what needs the model,
the service what needs the database (does the tenant exist).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from controlplane.core.choices import HandoffMode, Pipeline
from controlplane.core.errors import flatten_detail
from controlplane.inventory.models import identifier_validator

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
REQUEST_ID = r"^[A-Za-z0-9._:-]{1,128}$"
KEY_PREFIX = r"^[a-f0-9]{1,16}$"
IDENTIFIER_MAX = 64
AGENT_NAME_MAX = 100  # agents.Agent.name


def cross_field_errors(attrs: Mapping[str, Any]) -> dict[str, str]:
    """The rules between fields of a record that parsed field by field."""
    errors: dict[str, str] = {}
    if attrs["hit_tokens"] + attrs["miss_tokens"] != attrs["input_tokens"]:
        errors["input_tokens"] = "Must equal hit_tokens + miss_tokens."
    if attrs["finish_time"] < attrs["arrival_time"]:
        errors["finish_time"] = "Must not be before arrival_time."
    return errors


class RequestRecordInput(serializers.Serializer):  # type: ignore[type-arg]
    """One request as an agent reports it (``input_tokens = hit_tokens + miss_tokens``)."""

    request_id = serializers.RegexField(REQUEST_ID)
    tenant = serializers.CharField(max_length=IDENTIFIER_MAX, validators=[identifier_validator])
    api_key_prefix = serializers.RegexField(
        KEY_PREFIX, required=False, allow_blank=True, default=""
    )
    model = serializers.CharField(max_length=IDENTIFIER_MAX, validators=[identifier_validator])
    site = serializers.CharField(max_length=IDENTIFIER_MAX, validators=[identifier_validator])
    pipeline = serializers.ChoiceField(choices=Pipeline.choices)
    arrival_time = serializers.DateTimeField()
    finish_time = serializers.DateTimeField()
    input_tokens = serializers.IntegerField(min_value=0, max_value=INT32_MAX)
    hit_tokens = serializers.IntegerField(min_value=0, max_value=INT32_MAX)
    miss_tokens = serializers.IntegerField(min_value=0, max_value=INT32_MAX)
    output_tokens = serializers.IntegerField(min_value=0, max_value=INT32_MAX)
    ttft_s = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)
    tpot_s = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)
    wan_bytes = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    handoff_mode = serializers.ChoiceField(
        choices=HandoffMode.choices, required=False, allow_blank=True, default=""
    )
    rld_tokens = serializers.IntegerField(min_value=0, max_value=INT32_MAX, default=0)
    md_tokens = serializers.IntegerField(min_value=0, max_value=INT32_MAX, default=0)
    sla_met = serializers.BooleanField()
    rejected = serializers.BooleanField(default=False)
    config_version = serializers.IntegerField(
        min_value=0, max_value=INT32_MAX, required=False, allow_null=True, default=None
    )
    agent = serializers.CharField(
        max_length=AGENT_NAME_MAX, validators=[identifier_validator], required=False,
        allow_blank=True, default="",
        help_text="the gateway agent that wrote the record (its registered name); required "
        "from agent tokens, whose records are accepted only from their site's gateways",
    )  # fmt: skip

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors = cross_field_errors(attrs)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


def _exact(pattern: str) -> str:
    """``pattern`` anchored at the true end: ``$`` also matches before a final newline, which
    DRF trims away first and the fast parser must therefore refuse."""
    return pattern.removesuffix("$") + r"\Z"


def _one_of(values: Sequence[str]) -> str:
    return "^(?:" + "|".join(re.escape(v) for v in values) + r")\Z"


_Identifier = Annotated[
    str, msgspec.Meta(max_length=IDENTIFIER_MAX, pattern=_exact(identifier_validator.regex.pattern))
]
_Int32 = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
_Seconds = Annotated[float, msgspec.Meta(ge=0)]
_Time = Annotated[datetime, msgspec.Meta(tz=True)]


class RecordFast(msgspec.Struct):
    """The canonical form of ``RequestRecordInput``: the fast parser's schema."""

    request_id: Annotated[str, msgspec.Meta(pattern=_exact(REQUEST_ID))]
    tenant: _Identifier
    model: _Identifier
    site: _Identifier
    pipeline: Annotated[str, msgspec.Meta(pattern=_one_of(Pipeline.values))]
    arrival_time: _Time
    finish_time: _Time
    input_tokens: _Int32
    hit_tokens: _Int32
    miss_tokens: _Int32
    output_tokens: _Int32
    sla_met: bool
    api_key_prefix: Annotated[str, msgspec.Meta(pattern=r"^\Z|" + _exact(KEY_PREFIX))] = ""
    ttft_s: _Seconds | None = None
    tpot_s: _Seconds | None = None
    wan_bytes: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)] = 0
    handoff_mode: Annotated[str, msgspec.Meta(pattern=_one_of(HandoffMode.values))] = ""
    rld_tokens: _Int32 = 0
    md_tokens: _Int32 = 0
    rejected: bool = False
    config_version: _Int32 | None = None
    agent: Annotated[
        str,
        msgspec.Meta(
            max_length=AGENT_NAME_MAX,
            pattern=r"^\Z|" + _exact(identifier_validator.regex.pattern),
        ),
    ] = ""


# The timestamps the fast parser takes: RFC 3339 as agents write it. msgspec also reads a
# lower-case "t"/"z", a space, or more than 6 fraction digits (rounded; DRF truncates): those
# go to the serializer.
_CANONICAL_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})\Z"
)


def record_fast(raw: Any) -> dict[str, Any] | None:
    """``raw`` parsed by the fast parser, or None when it needs the reference one."""
    for name in ("arrival_time", "finish_time"):
        value = raw.get(name)
        if not isinstance(value, str) or _CANONICAL_TIME.match(value) is None:
            return None
    try:
        parsed = msgspec.convert(raw, RecordFast)
    except msgspec.ValidationError:
        return None
    fields = msgspec.structs.asdict(parsed)
    return fields if _settled(fields) else None


def _settled(fields: dict[str, Any]) -> bool:
    """The rules of a converted record msgspec does not check, applied in place: whether the
    record stands (else the reference parser decides)."""
    for name in ("ttft_s", "tpot_s"):  # DRF refuses NaN and infinities
        if fields[name] is not None and not math.isfinite(fields[name]):
            return False
    for name in ("arrival_time", "finish_time"):  # as DRF gives them: in UTC
        if fields[name].tzinfo is not UTC:  # "Z" already reads as UTC
            fields[name] = fields[name].astimezone(UTC)
    return not cross_field_errors(fields)


_BATCH = list[RecordFast]


def _batch_fast(records: Sequence[Any]) -> list[dict[str, Any]] | None:
    """Every record parsed by the fast parser, as ``record_fast`` would, in one msgspec call
    for the batch; None when any record needs a closer look (then each is parsed alone)."""
    match = _CANONICAL_TIME.match
    if not all(type(r) is dict and type(a := r.get("arrival_time")) is str
               and type(f := r.get("finish_time")) is str and match(a) and match(f)
               for r in records):  # fmt: skip
        return None
    try:
        parsed = msgspec.convert(records, _BATCH)
    except msgspec.ValidationError:
        return None
    batch = [msgspec.structs.asdict(p) for p in parsed]
    return batch if all(map(_settled, batch)) else None


def records_parse(
    records: Sequence[Any],
) -> tuple[list[tuple[int, dict[str, Any]]], dict[int, dict[str, Any]]]:
    """Parse each record on its own: ``(index, fields)`` of the good ones, and the field
    errors of the others by index (plain strings, as the envelope carries them)."""
    batch = _batch_fast(records)
    if batch is not None:  # the common case: an agent's batch of good, canonical records
        return list(enumerate(batch)), {}
    valid: list[tuple[int, dict[str, Any]]] = []
    errors: dict[int, dict[str, Any]] = {}
    parser: RequestRecordInput | None = None  # built once, and only when needed
    for index, raw in enumerate(records):
        if not isinstance(raw, Mapping):
            errors[index] = {"non_field_errors": ["Each record must be a JSON object."]}
            continue
        fast = record_fast(raw)
        if fast is not None:
            valid.append((index, fast))
            continue
        parser = parser or RequestRecordInput()
        try:
            valid.append((index, dict(parser.run_validation(raw))))
        except ValidationError as exc:
            errors[index] = flatten_detail(exc.detail)
    return valid, errors
