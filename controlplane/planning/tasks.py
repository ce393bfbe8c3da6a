"""Celery jobs of the planner: compute a plan, fanning its simulator verifications out.

``plan_compute_task(id)`` runs the analytic search, then a chord: one ``plan_verify_task`` per
design of the first round (a Celery group, in parallel over workers; in eager mode in-process)
and ``plan_finish_task`` when all are back, which runs any fix-up simulations, the bathtub and
the reasons and stores the result. Every task is idempotent: a done plan is left alone, and a
failure anywhere leaves a readable error on the plan instead of a stuck "running".

``sweep_run_task(id)`` does the same for a capacity sweep: a chord of one ``sweep_point_task``
per (scenario, WAN bandwidth, policy) point and ``sweep_finish_task`` to store the table.

``fleet.fleet_part_task`` (imported here so the worker registers it) runs one task of a fleet
plan's phases (``manage.py plan_fleet``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from celery import chord, shared_task

from controlplane.planning import services, sweep_services
from controlplane.planning.fleet import fleet_part_task  # noqa: F401 - registers the task
from controlplane.planning.jobs import Job, job_error, running_job
from controlplane.planning.models import Plan, PlanStatus, Sweep
from pdd_core.planner import (
    design_from_dict,
    finish,
    first_round,
    prepare,
    verification_from_dict,
    verify,
)
from pdd_core.sweep import run_point

# Progress budget: search up to 20%, verifications share 20-80%, finishing to 100%.
SEARCH_DONE = 20
VERIFY_SHARE = 60

Part = TypeVar("Part")


def _fail(plan_id: int, exc: BaseException) -> None:
    services.plan_failed(plan_id, job_error("plan", plan_id, exc))


def _reporter(plan_id: int, low: int, high: int) -> Any:
    def report(fraction: float, message: str) -> None:
        services.plan_progress(plan_id, round(low + (high - low) * fraction), message)

    return report


@shared_task(name=services.PLAN_COMPUTE_TASK)
def plan_compute_task(plan_id: int) -> str:
    """Start (or restart) a plan's job; a done plan is not recomputed."""
    plan = Plan.objects.filter(pk=plan_id).first()
    if plan is None or plan.status == PlanStatus.DONE:
        return "skipped"
    if not services.plan_started(plan_id):
        return "skipped"
    try:
        inputs = services.planner_inputs(plan)
        prepared = prepare(inputs, _reporter(plan_id, 0, SEARCH_DONE))
        designs = first_round(inputs, prepared)
    except Exception as exc:
        _fail(plan_id, exc)
        return "failed"
    services.plan_progress(plan_id, SEARCH_DONE, f"verifying {len(designs)} designs")
    if not designs:
        plan_finish_task.delay([], plan_id)
        return "finishing"
    step = VERIFY_SHARE // len(designs)
    header = [plan_verify_task.s(plan_id, d.to_dict(), step) for d in designs]
    chord(header)(plan_finish_task.s(plan_id))
    return "verifying"


def _job_part(
    model: type[Job],
    job_id: int,
    fail: Callable[[int, BaseException], None],
    compute: Callable[[Job], Part],
) -> Part | None:
    """Compute one part of a running job (a chord member): None when the job is not running
    (deleted, failed meanwhile, a stale retry); a failure fails the whole job, with its readable
    error, and is raised again so that the chord does not finish."""
    job = running_job(model, job_id)
    if job is None:
        return None
    try:
        return compute(job)
    except Exception as exc:
        fail(job_id, exc)
        raise


@shared_task(name="planning.plan_verify")
def plan_verify_task(plan_id: int, design: dict[str, Any], step: int) -> dict[str, Any] | None:
    """One simulator run of one design (the unit the group fans out)."""

    def run(plan: Plan) -> dict[str, Any]:
        return verify(services.planner_inputs(plan), design_from_dict(design)).to_dict()

    result = _job_part(Plan, plan_id, _fail, run)
    if result is not None:
        services.plan_progress_step(plan_id, step, cap=SEARCH_DONE + VERIFY_SHARE)
    return result


def _job_finish(
    model: type[Job],
    job_id: int,
    fail: Callable[[int, BaseException], None],
    store: Callable[[Job], bool],
) -> str:
    """Finish a running job (a chord's callback): "skipped" when it is not running, "failed"
    when ``store`` failed it (it returns False) or raised (the job fails with the readable
    error: a job is never left running), else "done"."""
    job = running_job(model, job_id)
    if job is None:
        return "skipped"
    try:
        stored = store(job)
    except Exception as exc:
        fail(job_id, exc)
        return "failed"
    return "done" if stored else "failed"


@shared_task(name="planning.plan_finish")
def plan_finish_task(results: list[dict[str, Any] | None], plan_id: int) -> str:
    """Fix-ups, bathtub, reasons; store the plan (or why there is none)."""

    def store(plan: Plan) -> bool:
        inputs = services.planner_inputs(plan)
        prepared = prepare(inputs)
        checked = [verification_from_dict(r) for r in results if r]
        outcome = finish(
            inputs, prepared, checked, _reporter(plan_id, SEARCH_DONE + VERIFY_SHARE, 99)
        )
        services.plan_finished(plan_id, outcome.to_dict())
        return True

    return _job_finish(Plan, plan_id, _fail, store)


# Sweeps: one task per (scenario, WAN bandwidth, policy) point, gathered by a chord.


def _sweep_fail(sweep_id: int, exc: BaseException) -> None:
    sweep_services.sweep_failed(sweep_id, job_error("sweep", sweep_id, exc))


@shared_task(name=sweep_services.SWEEP_RUN_TASK)
def sweep_run_task(sweep_id: int) -> str:
    """Start (or restart) a sweep: a chord of one ``sweep_point_task`` per point; a done sweep
    is not recomputed."""
    sweep = Sweep.objects.filter(pk=sweep_id).first()
    if sweep is None or sweep.status == PlanStatus.DONE:
        return "skipped"
    if not sweep_services.sweep_started(sweep_id):
        return "skipped"
    header = [sweep_point_task.s(sweep_id, index) for index in range(sweep.points)]
    chord(header)(sweep_finish_task.s(sweep_id))
    return "running"


@shared_task(name="planning.sweep_point")
def sweep_point_task(sweep_id: int, index: int) -> dict[str, Any] | None:
    """One point: a fixed-load run and a capacity search (``pdd_core.sweep.run_point``)."""

    def run(sweep: Sweep) -> tuple[str, dict[str, Any]]:
        scenario, point, iterations = sweep_services.sweep_point(sweep, index)
        row = run_point(scenario, point, iterations=iterations).to_dict()
        return f"{point.scenario} {point.policy}", row

    done = _job_part(Sweep, sweep_id, _sweep_fail, run)
    if done is None:
        return None
    label, row = done
    sweep_services.sweep_point_done(sweep_id, label)
    return row


@shared_task(name="planning.sweep_finish")
def sweep_finish_task(rows: list[dict[str, Any] | None], sweep_id: int) -> str:
    """Store the table once every point is back (in the points' order, as the chord gives)."""

    def store(sweep: Sweep) -> bool:
        if len(rows) != sweep.points or any(row is None for row in rows):
            sweep_services.sweep_failed(
                sweep_id, "a point returned no row (the sweep was restarted)"
            )
            return False
        sweep_services.sweep_finished(sweep_id, [row for row in rows if row is not None])
        return True

    return _job_finish(Sweep, sweep_id, _sweep_fail, store)
