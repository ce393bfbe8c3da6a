"""The lifecycle that plans and sweeps share (both are ``JobState`` rows a worker computes):
queue a job's task, start a queued or retried job, record a failure, and find a job still running.

Each write is one conditional ``UPDATE`` so that concurrent workers and retries cannot move a
job backwards: a done job is never restarted nor failed. Services queue a job's task by its
Celery name (``job_enqueue``, ``core.dispatch``): the tasks import the services, not the reverse.
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Any, TypeVar

from celery import current_app
from django.db import connections
from django.utils import timezone

from controlplane.core.dispatch import task_delay
from controlplane.planning.models import JobState, PlanStatus

logger = logging.getLogger(__name__)

Job = TypeVar("Job", bound=JobState)

ERROR_MAX_CHARS = 4000


def job_started(model: type[JobState], job_id: int, **reset: Any) -> bool:
    """Mark a queued (or retried) job running, clearing its error and setting ``reset`` (its
    progress fields); False when it is already done (idempotent)."""
    updated = (
        model._default_manager.filter(pk=job_id)
        .exclude(status=PlanStatus.DONE)
        .update(status=PlanStatus.RUNNING, started_at=timezone.now(), error="", **reset)
    )
    return bool(updated)


def job_failed(model: type[JobState], job_id: int, error: str) -> None:
    """Leave a readable error; a done job stays done."""
    model._default_manager.filter(pk=job_id).exclude(status=PlanStatus.DONE).update(
        status=PlanStatus.FAILED, error=error[:ERROR_MAX_CHARS], finished_at=timezone.now()
    )


def running_job(model: type[Job], job_id: int) -> Job | None:
    """The job if it exists and is running; None tells a task to do nothing (the job was
    deleted, failed meanwhile, or the task is a stale retry)."""
    job = model._default_manager.filter(pk=job_id).first()
    if job is None or job.status != PlanStatus.RUNNING:
        return None
    return job


def job_error(kind: str, job_id: int, exc: BaseException) -> str:
    """Log the failure of a job and return the readable error it keeps (with the traceback's
    last frames)."""
    logger.exception("%s %s failed", kind, job_id)
    return f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc(limit=4)}"


def job_enqueue(model: type[JobState], job_id: int, task_name: str) -> None:
    """Queue a job's task (``task_name``, given the job's id) so that the request asking for it
    answers 202 at once.

    With a broker the job goes to a Celery worker. With eager Celery (the embedded defaults, no
    worker) it runs on a background thread of this process instead of inside the request; the
    thread closes its database connections when the job ends.
    """
    if not current_app.conf.task_always_eager:
        task_delay(task_name, job_id)
        return
    kind = str(model._meta.model_name)  # "plan", "sweep"
    threading.Thread(
        target=_run_in_thread,
        args=(model, kind, job_id, task_name),
        name=f"{kind}-{job_id}",
        daemon=True,
    ).start()


def _run_in_thread(model: type[JobState], kind: str, job_id: int, task_name: str) -> None:
    try:
        task_delay(task_name, job_id)
    except Exception as exc:  # the thread's last resort: the job records it, never "running"
        job_failed(model, job_id, job_error(kind, job_id, exc))
    finally:
        connections.close_all()


def job_runner() -> str:
    """Where queued jobs run, in words for pages (``job_enqueue`` decides it the same way)."""
    if current_app.conf.task_always_eager:
        return "on a background thread of the web server (no Celery worker is configured)"
    return "on a Celery worker"
