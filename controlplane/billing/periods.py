"""Parsing of the billing API's periods, dates and filters into plain values, or a 400 naming
the parameter; the views call these before touching the database."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.utils.dateparse import parse_date, parse_datetime
from rest_framework.exceptions import ValidationError

_PERIOD = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
# What ``parse_period`` takes, as the API schema states it: months of the years 1970-9998.
PERIOD_PATTERN = (
    r"^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-(0[1-9]|1[0-2])$"
)
GROUP_TIME = ("hour", "day", "month")
GROUP_OTHER = ("model", "site", "pipeline", "tenant", "config_version")
# Hour buckets over more than this many days would be an unbounded response.
MAX_HOURLY_DAYS = 93


@dataclass(frozen=True)
class Period:
    """A calendar month in UTC, ``[start, end)``."""

    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        return f"{self.start:%Y-%m}"

    def previous_start(self) -> datetime:
        return period_of(self.start - timedelta(days=1)).start


def period_of(moment: datetime | date) -> Period:
    year, month = moment.year, moment.month
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return Period(start, end)


def parse_period(value: str, name: str = "period") -> Period:
    match = _PERIOD.match(value or "")
    # The period's end must be a representable date: December 9999 has none.
    if match is None or not 1970 <= int(match.group(1)) <= 9998:
        raise ValidationError(
            {name: [f"Expected a month as YYYY-MM (e.g. 2025-01), got {value!r}."]}
        )
    return period_of(date(int(match.group(1)), int(match.group(2)), 1))


def parse_instant(value: str, name: str) -> datetime:
    """An ISO date (midnight UTC) or an ISO date-time (UTC if it has no offset)."""
    parsed: datetime | None = None
    try:
        parsed = parse_datetime(value)
        if parsed is None:
            day = parse_date(value)
            parsed = datetime(day.year, day.month, day.day) if day else None
    except ValueError:
        parsed = None
    if parsed is None or not 1970 <= parsed.year <= 9998:
        raise ValidationError(
            {name: [f"Expected an ISO date or date-time (e.g. 2025-01-31), got {value!r}."]}
        )
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_range(
    raw_from: str | None, raw_to: str | None, now: datetime
) -> tuple[datetime, datetime]:
    """``from`` inclusive, ``to`` exclusive; defaults to the current month."""
    current = period_of(now)
    start = parse_instant(raw_from, "from") if raw_from else current.start
    end = parse_instant(raw_to, "to") if raw_to else (current.end if not raw_from else now)
    if end <= start:
        raise ValidationError({"to": ["Must be after 'from'."]})
    return start, end


def parse_group_by(value: str | None) -> tuple[str | None, tuple[str, ...]]:
    """``day``, ``model`` or ``day,model``: at most one time bucket plus dimensions."""
    if not value:
        return "day", ()
    parts = [p.strip() for p in value.split(",")]
    allowed = (*GROUP_TIME, *GROUP_OTHER)
    bad = [p for p in parts if p not in allowed]
    if bad or len(set(parts)) != len(parts):
        raise ValidationError(
            {"group_by": [f"Use a comma-separated subset of {', '.join(allowed)} without "
                          f"repeats, got {value!r}."]}
        )  # fmt: skip
    times = [p for p in parts if p in GROUP_TIME]
    if len(times) > 1:
        raise ValidationError({"group_by": ["At most one of hour, day, month."]})
    return (times[0] if times else None), tuple(p for p in parts if p in GROUP_OTHER)
