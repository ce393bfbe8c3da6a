"""SLA attainment at a glance: each target's percentile and attainment over the last minute and
the last hour, coloured green, amber or red.

A target is a percentile bound ("TTFT P90 at most 5 s"). Its **attainment** is the share of
requests within the bound: those whose TTFT (or TPOT) is at most the target, read from the
window's histogram (``sketch.count_within``, which agrees with ``sketch.quantile`` on whether
the target is met), over every request the metric applies to, with rejected requests counted
as misses (``pdd_core.metrics``: shedding load cannot buy a met SLA). The objective is the
percentile itself (90 % for a P90 target). The colour follows the error budget the objective
leaves (10 % of requests for P90, 1 % for P99):

- green: attainment at least the objective plus half the budget (P90: 95 %; P99: 99.5 %);
- amber: the objective is met with less than half its budget left;
- red: the objective is missed (the percentile is above the target);
- none: no request in the window.

"Last minute" is the newest closed 1-minute window; "last hour" merges the 1-minute windows
that started in the last 60 minutes (rollups add up, ``rollups.Delta.merge``). The targets are
``selectors.sla_lines`` (the deployment-wide rules, else ``pdd_core.specs.SLA``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.telemetry import sketch
from controlplane.telemetry.models import TelemetryRollup
from controlplane.telemetry.rollups import Delta, delta_of
from controlplane.telemetry.selectors import sla_lines

WINDOW_S = 60
HOUR_S = 3600
# (target key of sla_lines, metric, percentile, label)
TARGETS = (
    ("ttft_p90", "ttft", 90, "TTFT P90"),
    ("ttft_p99", "ttft", 99, "TTFT P99"),
    ("tpot_p90", "tpot", 90, "TPOT P90"),
    ("tpot_p99", "tpot", 99, "TPOT P99"),
)


def colour(attainment: float | None, percentile: float) -> str:
    """green, amber, red or none, by the rule in the module docstring."""
    if attainment is None:
        return "none"
    objective = percentile / 100
    if attainment < objective:
        return "red"
    return "green" if attainment >= objective + (1 - objective) / 2 else "amber"


def target_figure(delta: Delta, metric: str, percentile: int, target: float) -> dict[str, Any]:
    """One target over one window: the served requests' percentile, the attainment (rejected
    requests as misses) and its colour."""
    hist = delta.maps[f"{metric}_hist"]
    rejected = int(delta.counts["rejected"])
    measured = sketch.total(hist) + rejected
    within = sketch.count_within(hist, target)
    attainment = within / measured if measured else None
    return {
        "value": sketch.quantile(hist, percentile),
        "attainment": attainment,
        "requests": measured,
        "rejected": rejected,
        "state": colour(attainment, percentile),
    }


def _window_figures(delta: Delta | None, lines: dict[str, float]) -> dict[str, Any]:
    if delta is None:
        delta = Delta()
    served = delta.counts["requests"] - delta.counts["rejected"]
    requests = delta.counts["requests"]
    return {
        "requests": requests,
        "sla_met_share": delta.counts["sla_met"] / requests if requests else None,
        "served": served,
        "targets": {
            name: target_figure(delta, metric, q, lines[name]) for name, metric, q, _ in TARGETS
        },
    }


def sla_panel(*, scope: str = "all", key: str = "") -> dict[str, Any]:
    """The panel's figures for one scope: targets, and per window (``minute``, ``hour``) the
    request count, the share that met every target, and each target's figure."""
    lines = sla_lines()
    now = timezone.now()
    rows = list(
        TelemetryRollup.objects.filter(
            window_s=WINDOW_S, scope=scope, key=key,
            start__gte=now - timedelta(seconds=HOUR_S), start__lte=now,
        ).order_by("start")
    )  # fmt: skip
    hour = Delta()
    for row in rows:
        hour.merge(delta_of(row))
    closed = [r for r in rows if r.start + timedelta(seconds=WINDOW_S) <= now]
    minute = delta_of(closed[-1]) if closed else None
    return {
        "targets": [
            {"key": name, "label": label, "percentile": q, "target_s": lines[name]}
            for name, _, q, label in TARGETS
        ],
        "minute": _window_figures(minute, lines),
        "minute_start": closed[-1].start.isoformat().replace("+00:00", "Z") if closed else None,
        "hour": _window_figures(hour if rows else None, lines),
    }
