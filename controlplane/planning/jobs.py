"""The lifecycle writes that plans and sweeps share (both are ``JobState`` rows a worker
computes): start a queued or retried job, record a failure, and find a job still running.

Each write is one conditional ``UPDATE`` so that concurrent workers and retries cannot move a
job backwards: a done job is never restarted nor failed.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.utils import timezone

from controlplane.planning.models import JobState, PlanStatus

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
