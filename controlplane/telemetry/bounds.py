"""What a reported record may say: every number bounded by physics or by its model.

The bounds themselves are the data plane's record definition (``pdd_core.records``: tokens
within the model's context window, relay and main decode tokens each at most
``output_tokens``, WAN bytes at most every attempt of the request sending the KV of its whole
context, times near the receiver's clock and TTFT/TPOT within the request), so a record a
gateway can write is one ingestion accepts. This module adds what only the control plane
knows: the settings of the time bounds (``PDD_TELEMETRY_CLOCK_SKEW_S``,
``PDD_TELEMETRY_MAX_RECORD_AGE_DAYS``). The model comes from the inventory
(``inventory.selectors.model_specs``); a record of a model the inventory does not know is
refused before these checks (nothing could bound or price it). These checks are pure: plain
values in, messages out.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from pdd_core.records import RecordLimits, TimeBounds, record_bound_errors, within_bounds

__all__ = [
    "RecordLimits",
    "TimeBounds",
    "record_bound_errors",
    "time_bounds_at",
    "within_bounds",
]


def time_bounds_at(now: datetime) -> TimeBounds:
    """The time bounds of records received at ``now``, with this deployment's settings."""
    return TimeBounds.around(
        now,
        skew_s=int(settings.TELEMETRY_CLOCK_SKEW_S),
        max_age_days=int(settings.TELEMETRY_MAX_RECORD_AGE_DAYS),
    )
