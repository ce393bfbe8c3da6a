"""The lifecycle shared by plans and sweeps: start, fail, and the running-job guard of tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controlplane.planning.jobs import job_failed, job_started, running_job
from controlplane.planning.models import JobState, Plan, PlanStatus, Sweep

pytestmark = pytest.mark.django_db


def _plan(status: str) -> Plan:
    return Plan.objects.create(scenario="small.toml", inputs={}, status=status, progress=40)


def _sweep(status: str) -> Sweep:
    return Sweep.objects.create(inputs={}, points=3, done_points=2, status=status)


@pytest.mark.parametrize(
    ("make", "reset"), [(_plan, {"progress": 0}), (_sweep, {"done_points": 0})]
)
@pytest.mark.parametrize("status", [PlanStatus.QUEUED, PlanStatus.FAILED, PlanStatus.RUNNING])
def test_a_job_not_done_starts_with_its_progress_reset(
    make: Callable[[str], JobState], reset: dict[str, Any], status: str
) -> None:
    job: JobState = make(status)
    job.error = "old error"
    job.save()
    assert job_started(type(job), job.pk, **reset) is True
    job.refresh_from_db()
    assert job.status == PlanStatus.RUNNING
    assert job.error == ""
    assert job.started_at is not None
    assert all(getattr(job, field) == value for field, value in reset.items())


@pytest.mark.parametrize("make", [_plan, _sweep])
def test_a_done_job_is_neither_restarted_nor_failed(make: Callable[[str], JobState]) -> None:
    job: JobState = make(PlanStatus.DONE)
    assert job_started(type(job), job.pk) is False
    job_failed(type(job), job.pk, "late error")
    job.refresh_from_db()
    assert job.status == PlanStatus.DONE
    assert job.error == ""


@pytest.mark.parametrize("make", [_plan, _sweep])
def test_a_failed_job_keeps_a_bounded_readable_error(make: Callable[[str], JobState]) -> None:
    job: JobState = make(PlanStatus.RUNNING)
    job_failed(type(job), job.pk, "ValueError: boom\n" + "x" * 5000)
    job.refresh_from_db()
    assert job.status == PlanStatus.FAILED
    assert job.error.startswith("ValueError: boom\n")
    assert len(job.error) == 4000
    assert job.finished_at is not None


@pytest.mark.parametrize("make", [_plan, _sweep])
def test_only_a_running_job_is_handed_to_a_task(make: Callable[[str], JobState]) -> None:
    running = make(PlanStatus.RUNNING)
    assert running_job(type(running), running.pk) == running
    for status in (PlanStatus.QUEUED, PlanStatus.DONE, PlanStatus.FAILED):
        other = make(status)
        assert running_job(type(other), other.pk) is None
    assert running_job(type(running), running.pk + 1000) is None
