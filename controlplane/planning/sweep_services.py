"""Writes of capacity sweeps: request one, record its points' progress, store its table.

The sweep itself is ``pdd_core.sweep`` (the same code as ``pdd sweep`` and ``pdd compare``);
these services validate what was asked against the scenario fixtures, snapshot the scenario
files so a worker recomputes exactly that, and keep the job's state (a done sweep stays done, a
failed one carries a readable error). Kept apart from ``services.py`` (plans and workloads) so the
two jobs' writes read on their own.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from controlplane.planning.jobs import job_enqueue, job_failed, job_started
from controlplane.planning.models import PlanStatus, Sweep
from controlplane.planning.selectors import SCENARIO_DIR, scenario_names
from pdd_core.scenario import Scenario, scenario_from_dict
from pdd_core.specs import LinkKind
from pdd_core.sweep import SweepPoint, sweep_points

# One task per point; a sweep larger than this is better split (each point is several
# simulator runs, and a queue of thousands would starve plans behind it).
MAX_POINTS = 64
# A sweep's job (``tasks.sweep_run_task``), queued by name: tasks import this module.
SWEEP_RUN_TASK = "planning.sweep_run"


def _scenario(text: str) -> Scenario:
    return scenario_from_dict(tomllib.loads(text), base_dir=SCENARIO_DIR)


@transaction.atomic
def sweep_request(
    *,
    scenarios: Sequence[str],
    policies: Sequence[str],
    wan_gbps: Sequence[float] = (),
    iterations: int = 3,
    requested_by: str = "",
) -> Sweep:
    """Create a queued sweep of the cross product and queue its job once committed.

    Errors name the field: an unknown scenario, a repeated value, a WAN bandwidth for a scenario
    without a WAN link, more than ``MAX_POINTS`` points. Nothing is stored on an error.
    """
    known = scenario_names()
    unknown = [name for name in scenarios if name not in known]
    if unknown:
        raise ValidationError({"scenarios": [f"Unknown scenario {name!r}." for name in unknown]})
    try:
        points = sweep_points(scenarios, policies, wan_gbps)
    except ValueError as exc:
        field, _, reason = str(exc).partition(": ")
        raise ValidationError({field: [reason or str(exc)]}) from None
    if len(points) > MAX_POINTS:
        raise ValidationError(
            {"non_field_errors": [f"{len(points)} points; a sweep may have at most {MAX_POINTS}."]}
        )
    texts = {name: (SCENARIO_DIR / name).read_text(encoding="utf-8") for name in scenarios}
    if wan_gbps:
        no_wan = [
            name
            for name, text in texts.items()
            if not any(link.kind is LinkKind.WAN for link in _scenario(text).pdd.links)
        ]
        if no_wan:
            raise ValidationError(
                {"wan_gbps": [f"Scenario {name!r} has no WAN link to set." for name in no_wan]}
            )
    sweep = Sweep.objects.create(
        inputs={
            "scenario_toml": texts,
            "points": [p.to_dict() for p in points],
            "iterations": iterations,
        },
        points=len(points),
        requested_by=requested_by,
    )
    sweep_id = sweep.pk
    transaction.on_commit(lambda: job_enqueue(Sweep, sweep_id, SWEEP_RUN_TASK))
    return sweep


def sweep_point(sweep: Sweep, index: int) -> tuple[Scenario, SweepPoint, int]:
    """Point ``index`` of the sweep with its scenario rebuilt from the snapshot, and the
    bisection steps (deterministic: any worker computes the same row)."""
    point = SweepPoint.from_dict(sweep.inputs["points"][index])
    scenario = _scenario(sweep.inputs["scenario_toml"][point.scenario])
    return scenario, point, int(sweep.inputs["iterations"])


def sweep_started(sweep_id: int) -> bool:
    """Mark a queued (or retried) sweep running; False when it is already done (idempotent)."""
    return job_started(Sweep, sweep_id, done_points=0)


def sweep_point_done(sweep_id: int, message: str = "") -> None:
    """Count one finished point (atomically: points finish on several workers at once)."""
    Sweep.objects.filter(
        pk=sweep_id, status=PlanStatus.RUNNING, done_points__lt=F("points")
    ).update(done_points=F("done_points") + 1, message=message[:200])


def sweep_finished(sweep_id: int, rows: list[dict[str, Any]]) -> None:
    """Store the table; only a running sweep finishes (a failed one keeps its error)."""
    Sweep.objects.filter(pk=sweep_id, status=PlanStatus.RUNNING).update(
        status=PlanStatus.DONE,
        rows=rows,
        done_points=F("points"),
        message="done",
        finished_at=timezone.now(),
    )


def sweep_failed(sweep_id: int, error: str) -> None:
    """Leave a readable error; a done sweep stays done."""
    job_failed(Sweep, sweep_id, error)
