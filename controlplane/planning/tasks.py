"""Celery jobs of the planner: compute a plan, fanning its simulator verifications out.

``plan_compute_task(id)`` runs the analytic search, then a chord: one ``plan_verify_task`` per
design of the first round (a Celery group, in parallel over workers; in eager mode in-process)
and ``plan_finish_task`` when all are back, which runs any fix-up simulations, the bathtub and
the reasons and stores the result. Every task is idempotent: a done plan is left alone, and a
failure anywhere leaves a readable error on the plan instead of a stuck "running".
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Any

from celery import chord, current_app, shared_task
from django.db import connections

from controlplane.planning import services
from controlplane.planning.models import Plan, PlanStatus
from pdd_core.planner import (
    design_from_dict,
    finish,
    first_round,
    prepare,
    verification_from_dict,
    verify,
)

logger = logging.getLogger(__name__)

# Progress budget: search up to 20%, verifications share 20-80%, finishing to 100%.
SEARCH_DONE = 20
VERIFY_SHARE = 60


def _fail(plan_id: int, exc: BaseException) -> None:
    logger.exception("plan %s failed", plan_id)
    message = f"{type(exc).__name__}: {exc}"
    services.plan_failed(plan_id, message + "\n\n" + traceback.format_exc(limit=4))


def _reporter(plan_id: int, low: int, high: int) -> Any:
    def report(fraction: float, message: str) -> None:
        services.plan_progress(plan_id, round(low + (high - low) * fraction), message)

    return report


@shared_task(name="planning.plan_compute")
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


@shared_task(name="planning.plan_verify")
def plan_verify_task(plan_id: int, design: dict[str, Any], step: int) -> dict[str, Any] | None:
    """One simulator run of one design (the unit the group fans out)."""
    plan = Plan.objects.filter(pk=plan_id).first()
    if plan is None or plan.status != PlanStatus.RUNNING:
        return None
    try:
        result = verify(services.planner_inputs(plan), design_from_dict(design)).to_dict()
    except Exception as exc:
        _fail(plan_id, exc)
        raise
    services.plan_progress_step(plan_id, step, cap=SEARCH_DONE + VERIFY_SHARE)
    return result


@shared_task(name="planning.plan_finish")
def plan_finish_task(results: list[dict[str, Any] | None], plan_id: int) -> str:
    """Fix-ups, bathtub, reasons; store the plan (or why there is none)."""
    plan = Plan.objects.filter(pk=plan_id).first()
    if plan is None or plan.status != PlanStatus.RUNNING:
        return "skipped"
    try:
        inputs = services.planner_inputs(plan)
        prepared = prepare(inputs)
        checked = [verification_from_dict(r) for r in results if r]
        outcome = finish(
            inputs, prepared, checked, _reporter(plan_id, SEARCH_DONE + VERIFY_SHARE, 99)
        )
    except Exception as exc:
        _fail(plan_id, exc)
        return "failed"
    services.plan_finished(plan_id, outcome.to_dict())
    return "done"


def plan_compute_enqueue(plan_id: int) -> None:
    """Queue a plan's job so that the request asking for it answers 202 at once.

    With a broker the job goes to a Celery worker. With eager Celery (the embedded defaults, no
    worker) it runs on a background thread of this process instead of inside the request; the
    thread closes its database connections when the job ends.
    """
    if not current_app.conf.task_always_eager:
        plan_compute_task.delay(plan_id)
        return
    threading.Thread(
        target=_compute_in_thread, args=(plan_id,), name=f"plan-{plan_id}", daemon=True
    ).start()


def _compute_in_thread(plan_id: int) -> None:
    try:
        plan_compute_task.delay(plan_id)
    except Exception as exc:  # the thread's last resort: the plan records it, never "running"
        _fail(plan_id, exc)
    finally:
        connections.close_all()
