"""What a reported record may say: every number bounded by physics or by its model.

A record that passes the field parser (``validation``) is still refused here when it could not
describe a real request, so that one bad record can neither overflow a rollup nor pin the
dashboard's latest window in the future:

- tokens: ``input_tokens + output_tokens`` fit the model's context window; relay and main
  decode tokens are each at most ``output_tokens``;
- WAN bytes: at most the KV cache of the whole context (``(input + output) x KV bytes per
  token``) sent twice (one retried transfer), plus ``WAN_FRAMING_BYTES`` of framing;
- times: ``finish_time`` no later than now plus the allowed clock skew
  (``PDD_TELEMETRY_CLOCK_SKEW_S``) and ``arrival_time`` no older than
  ``PDD_TELEMETRY_MAX_RECORD_AGE_DAYS``; a request lasts at most ``MAX_REQUEST_S``; TTFT and
  TPOT are within the request's duration.

The model comes from the inventory (``inventory.selectors.model_specs``); a model the inventory
does not know is bounded by ``UNKNOWN_MODEL`` (settings ``PDD_TELEMETRY_MAX_CONTEXT`` and
``PDD_TELEMETRY_MAX_KV_BYTES_PER_TOKEN``). These checks are pure: plain values in, messages out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from pdd_core.specs import ModelSpec

MAX_REQUEST_S = 24 * 3600
WAN_COPIES = 2
WAN_FRAMING_BYTES = 1 << 20
# Timestamps are wall-clock and TTFT/TPOT are measured on a monotonic clock: allow this much.
TIMING_SLACK_S = 1.0


@dataclass(frozen=True)
class RecordLimits:
    """The bounds a model puts on one record of it."""

    max_context: int
    kv_bytes_per_token: float

    @classmethod
    def of(cls, spec: ModelSpec) -> RecordLimits:
        return cls(max_context=spec.max_context, kv_bytes_per_token=spec.kv_bytes_per_token)

    def max_wan_bytes(self, tokens: int) -> int:
        return int(WAN_COPIES * tokens * self.kv_bytes_per_token) + WAN_FRAMING_BYTES


def unknown_model_limits() -> RecordLimits:
    """The bounds of a record whose model the inventory does not (yet) know."""
    return RecordLimits(
        max_context=settings.TELEMETRY_MAX_CONTEXT,
        kv_bytes_per_token=float(settings.TELEMETRY_MAX_KV_BYTES_PER_TOKEN),
    )


def _check_tokens(record: Mapping[str, Any], limits: RecordLimits, errors: dict[str, str]) -> None:
    tokens = record["input_tokens"] + record["output_tokens"]
    if tokens > limits.max_context:
        errors["input_tokens"] = (
            f"input_tokens + output_tokens = {tokens} exceeds the context window of "
            f"{record['model']!r} ({limits.max_context} tokens)."
        )
    for name in ("rld_tokens", "md_tokens"):
        if record[name] > record["output_tokens"]:
            errors[name] = f"Must not exceed output_tokens ({record['output_tokens']})."
    ceiling = limits.max_wan_bytes(min(tokens, limits.max_context))
    if record["wan_bytes"] > ceiling:
        errors["wan_bytes"] = (
            f"{record['wan_bytes']} bytes is more than the KV cache of this request can take "
            f"on the WAN (at most {ceiling} bytes for {tokens} tokens)."
        )


@dataclass(frozen=True)
class TimeBounds:
    """The time bounds of records received at one instant (built once per batch: the settings
    and the arithmetic are the same for all of its records)."""

    skew_s: int
    max_age_days: int
    latest_finish: datetime
    oldest_arrival: datetime

    @classmethod
    def at(cls, now: datetime) -> TimeBounds:
        skew_s = int(settings.TELEMETRY_CLOCK_SKEW_S)
        max_age_days = int(settings.TELEMETRY_MAX_RECORD_AGE_DAYS)
        return cls(skew_s=skew_s, max_age_days=max_age_days,
                   latest_finish=now + timedelta(seconds=skew_s),
                   oldest_arrival=now - timedelta(days=max_age_days))  # fmt: skip


def _check_times(record: Mapping[str, Any], times: TimeBounds, errors: dict[str, str]) -> None:
    arrival: datetime = record["arrival_time"]
    finish: datetime = record["finish_time"]
    if finish > times.latest_finish:
        errors["finish_time"] = (
            f"In the future: more than {times.skew_s} s after the control "
            "plane's clock; check the agent's clock."
        )
    if arrival < times.oldest_arrival:
        errors["arrival_time"] = f"Older than {times.max_age_days} days; not accepted."
    duration = (finish - arrival).total_seconds()
    if duration > MAX_REQUEST_S:
        errors.setdefault("finish_time", f"A request lasts at most {MAX_REQUEST_S} s.")
    for name in ("ttft_s", "tpot_s"):
        value = record.get(name)
        if value is None:
            continue
        if not math.isfinite(value) or value > max(duration, 0.0) + TIMING_SLACK_S:
            errors[name] = f"Must be finite and within the request's duration ({duration:.3f} s)."


def within_bounds(record: Mapping[str, Any], limits: RecordLimits, times: TimeBounds) -> bool:
    """Whether ``record`` breaks no bound: ``record_bound_errors`` is empty exactly when this
    is true. One function of plain comparisons, for the common case of a plausible record (the
    messages are built only for the others)."""
    output = record["output_tokens"]
    tokens = record["input_tokens"] + output
    finish: datetime = record["finish_time"]
    arrival: datetime = record["arrival_time"]
    if (tokens > limits.max_context or record["rld_tokens"] > output
            or record["md_tokens"] > output
            or record["wan_bytes"] > limits.max_wan_bytes(tokens)  # tokens <= max_context
            or finish > times.latest_finish or arrival < times.oldest_arrival):  # fmt: skip
        return False
    duration = (finish - arrival).total_seconds()
    if duration > MAX_REQUEST_S:
        return False
    ceiling = max(duration, 0.0) + TIMING_SLACK_S
    for name in ("ttft_s", "tpot_s"):
        value = record.get(name)
        if value is not None and not (math.isfinite(value) and value <= ceiling):
            return False
    return True


def record_bound_errors(
    record: Mapping[str, Any], limits: RecordLimits, times: TimeBounds
) -> dict[str, list[str]]:
    """Field -> messages for every bound ``record`` breaks (empty when it is plausible)."""
    errors: dict[str, str] = {}
    _check_tokens(record, limits, errors)
    _check_times(record, times, errors)
    return {name: [message] for name, message in errors.items()}
