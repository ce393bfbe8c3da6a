"""The one per-request record: its fields, its JSON shape and the bounds every record obeys.

A gateway journals one record per request it took (served, failed, timed out or turned away),
ships it to the control plane, and the control plane's ingestion bills and rolls it up. All
three read this module, so a record the data plane can write is, by construction, a record
ingestion accepts (``tests/security/test_gateway_records.py`` holds the gateway's real code
paths, faults included, to that):

- ``RECORD_FIELDS``: the control plane's record (``POST /api/v1/telemetry/records/``), in order;
- ``RequestRecord``: one request as an agent writes it (``to_json`` gives that shape, plus keys
  ingestion ignores: the writing agent, the agent of each stage, the error and the attempts);
- ``RecordLimits`` / ``TimeBounds`` / ``record_bound_errors``: what no real request can exceed.

**What a record counts** (the gateway's; P, RLD and MD keep partial records of their own).
A request runs as one or more *attempts* (the gateway resumes it on other agents after a loss,
at most ``MAX_ATTEMPTS``). Each figure comes from the attempt that served that part:

- hit and miss tokens from the attempt whose prefill the client got: the last attempt that
  prefilled the client's prompt as sent (a resumed attempt prefills the prompt plus the tokens
  already delivered; its counts describe another sequence). ``input_tokens`` is the client's
  prompt once a prefill of it ran, 0 when none did (refused, or failed before P's pass ended);
- output tokens are those the client received: all of a whole answer that succeeded, none of
  one that failed, and what was streamed before a stream failed. ``rld_tokens`` and
  ``md_tokens`` split exactly those by the agent that decoded each, so each is at most
  ``output_tokens``;
- WAN bytes are summed over the attempts (each attempt's own transfer crossed the line) and
  listed per attempt in ``attempts``;
- a failure (an agent lost past the resumes, a timeout, a client gone, a refusal) is a record
  too, with its ``error`` and ``sla_met`` false.

**Bounds.** Tokens fit the model's context window; WAN bytes are at most every attempt sending
the KV of the whole context (``WAN_COPIES`` = ``MAX_ATTEMPTS`` copies of ``(input + output) x
(KV bytes per token + FRAME_BYTES_PER_TOKEN)``, plus ``WAN_FRAMING_BYTES`` per copy for the
control frames); times are within a day of each other and near the receiver's clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pdd_core.specs import ModelSpec

RECORD_FIELDS = (
    "request_id",
    "tenant",
    "api_key_prefix",
    "model",
    "site",
    "pipeline",
    "arrival_time",
    "finish_time",
    "input_tokens",
    "hit_tokens",
    "miss_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "wan_bytes",
    "handoff_mode",
    "rld_tokens",
    "md_tokens",
    "sla_met",
    "rejected",
    "config_version",
)

# The gateway runs a request at most this many times (the first attempt and its resumes).
MAX_ATTEMPTS = 3
MAX_REQUEST_S = 24 * 3600
WAN_COPIES = MAX_ATTEMPTS
# Per token a KV block frame carries its token id (4 bytes) beside the KV, and per block a
# header (30 bytes plus the request id, at most 256): 64 bytes a token covers blocks of 16+.
FRAME_BYTES_PER_TOKEN = 64
WAN_FRAMING_BYTES = 1 << 20
# Timestamps are wall-clock and TTFT/TPOT are measured on a monotonic clock: allow this much.
TIMING_SLACK_S = 1.0


def iso(timestamp: float) -> str:
    """A UNIX time as the ISO 8601 UTC string the control plane parses."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


@dataclass(slots=True)
class AttemptRecord:
    """One attempt of a request: where it ran, what it prefilled, delivered and sent across
    the WAN, and why it ended early (empty for the attempt that finished)."""

    request_id: str
    pipeline: str
    prefill_agent: str = ""
    relay_agent: str = ""
    main_agent: str = ""
    hit_tokens: int = 0
    miss_tokens: int = 0
    output_tokens: int = 0
    wan_bytes: int = 0
    error: str = ""


@dataclass(slots=True)
class RequestRecord:
    """One request as an agent saw it; ``to_json`` gives the control plane's record shape.

    ``role`` and ``agent`` are extra keys (the ingestion API ignores unknown keys): the
    gateway's record is the complete one, the other agents' records carry their own part.
    ``prefill_agent``, ``relay_agent``, ``main_agent``, ``error`` and ``attempts`` (extra keys
    too) are the request's fate: which agent ran each stage, what failed, and each attempt.
    ``config_version`` is the control plane's config version whose routing table routed the
    request (None when the gateway runs on its file's table alone): usage and invoices group
    by it, so billing sees what activating a plan changed per token.
    """

    request_id: str
    tenant: str
    model: str
    site: str
    pipeline: str
    arrival: float
    finish: float
    hit_tokens: int = 0
    miss_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    wan_bytes: int = 0
    handoff_mode: str = ""
    rld_tokens: int = 0
    md_tokens: int = 0
    sla_met: bool = True
    rejected: bool = False
    api_key_prefix: str = ""
    role: str = ""
    agent: str = ""
    prefill_agent: str = ""
    relay_agent: str = ""
    main_agent: str = ""
    error: str = ""
    attempts: list[AttemptRecord] = field(default_factory=list)
    config_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        body = {
            "request_id": self.request_id,
            "tenant": self.tenant,
            "api_key_prefix": self.api_key_prefix,
            "model": self.model,
            "site": self.site,
            "pipeline": self.pipeline,
            "arrival_time": iso(self.arrival),
            "finish_time": iso(max(self.finish, self.arrival)),
            "input_tokens": self.hit_tokens + self.miss_tokens,
            "hit_tokens": self.hit_tokens,
            "miss_tokens": self.miss_tokens,
            "output_tokens": self.output_tokens,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "wan_bytes": self.wan_bytes,
            "handoff_mode": "" if self.handoff_mode == "none" else self.handoff_mode,
            "rld_tokens": self.rld_tokens,
            "md_tokens": self.md_tokens,
            "sla_met": self.sla_met,
            "rejected": self.rejected,
            "config_version": self.config_version,
            "role": self.role,
            "agent": self.agent,
            # The request's fate (extra keys): who served each stage, and why it failed.
            "prefill_agent": self.prefill_agent,
            "relay_agent": self.relay_agent,
            "main_agent": self.main_agent,
            "error": self.error,
        }
        if self.attempts:
            body["attempts"] = [asdict(a) for a in self.attempts]
        return body


@dataclass(frozen=True)
class RecordLimits:
    """The bounds a model puts on one record of it."""

    max_context: int
    kv_bytes_per_token: float

    @classmethod
    def of(cls, spec: ModelSpec) -> RecordLimits:
        return cls(max_context=spec.max_context, kv_bytes_per_token=spec.kv_bytes_per_token)

    def max_wan_bytes(self, tokens: int) -> int:
        """Every attempt sending the KV of ``tokens`` (its framing too) across the line."""
        per_token = self.kv_bytes_per_token + FRAME_BYTES_PER_TOKEN
        return int(WAN_COPIES * (tokens * per_token + WAN_FRAMING_BYTES))


@dataclass(frozen=True)
class TimeBounds:
    """The time bounds of records received at one instant (built once per batch: the
    arithmetic is the same for all of its records)."""

    skew_s: int
    max_age_days: int
    latest_finish: datetime
    oldest_arrival: datetime

    @classmethod
    def around(cls, now: datetime, *, skew_s: int, max_age_days: int) -> TimeBounds:
        """Finishing at most ``skew_s`` after ``now``, arriving at most ``max_age_days`` ago."""
        return cls(skew_s=skew_s, max_age_days=max_age_days,
                   latest_finish=now + timedelta(seconds=skew_s),
                   oldest_arrival=now - timedelta(days=max_age_days))  # fmt: skip


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
    """Whether a parsed ``record`` (times as aware datetimes) breaks no bound:
    ``record_bound_errors`` is empty exactly when this is true. One function of plain
    comparisons, for the common case of a plausible record (the messages are built only for
    the others)."""
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
