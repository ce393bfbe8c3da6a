"""The live workload against the active plan's: drift checks and the bathtub marker for the
overview (``pdd_core.planner.drift`` judges; this module reads the figures).

The live figures come from the deployment's 1-minute rollups of the last ``LIVE_WINDOW_MIN``
minutes (served requests only for hit and lengths, every request for the rate, over the time
from the first window with data to now), the plan's from what it was sized for
(``result["search"]["workload"]``). The same window is what "plan from the live window" turns
into a workload (``services.workload_create_from_telemetry``).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from django.utils import timezone

from controlplane.planning.models import Plan
from controlplane.planning.selectors import active_plan
from controlplane.telemetry.selectors import series
from pdd_core.planner.drift import WorkloadFigures, bathtub_position, checks

LIVE_WINDOW_MIN = 15


def live_workload(minutes: int = LIVE_WINDOW_MIN) -> WorkloadFigures | None:
    """The deployment's workload over the last ``minutes`` (None: no record in them)."""
    points = series(window_s=60, scope="all", points=minutes)
    requests = sum(int(p["requests"]) for p in points)
    if not requests:
        return None
    served = sum(int(p["served"]) for p in points)
    first = datetime.fromisoformat(points[0]["start"].replace("Z", "+00:00"))
    seconds = max((timezone.now() - first).total_seconds(), 60.0)
    hits = [(p["hit_request_weighted"], int(p["served"])) for p in points
            if p["hit_request_weighted"] is not None]  # fmt: skip
    input_tokens = sum(float(p["input_tokens_per_s"]) * 60 for p in points)
    output_tokens = sum(float(p["tokens_per_s"]) * 60 for p in points)
    return WorkloadFigures(
        rate_rps=requests / seconds,
        mean_hit=sum(h * n for h, n in hits) / served if served else None,
        mean_input_tokens=input_tokens / served if served else None,
        mean_output_tokens=output_tokens / served if served else None,
    )


def plan_drift(plan: Plan | None = None) -> dict[str, Any] | None:
    """For the overview: the active plan's workload against the live one, each check, whether
    any drifted, and the live point on the plan's bathtub (None without a feasible active plan).
    """
    plan = plan or active_plan()
    result = plan.result if plan is not None and isinstance(plan.result, dict) else None
    if plan is None or result is None or not result.get("feasible"):
        return None
    planned = WorkloadFigures.of_plan((result.get("search") or {}).get("workload"))
    live = live_workload()
    empty = WorkloadFigures(None, None, None, None)
    rows = checks(planned, live or empty)
    position = bathtub_position(
        result.get("bathtub"), live.mean_hit if live else None, live.rate_rps if live else None
    )
    return {
        "plan": plan.pk,
        "version": plan.version,
        "scenario": plan.scenario,
        "window_min": LIVE_WINDOW_MIN,
        "live": asdict(live) if live else None,
        "checks": [asdict(c) for c in rows],
        "drifted": [c.label for c in rows if c.drifted],
        "bathtub": result.get("bathtub"),
        "position": position,
    }
