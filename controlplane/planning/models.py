"""Workload profiles, plans and the active configuration version.

The planner itself lives in ``pdd_core.planner``; these models persist what it was asked (an
inputs snapshot, so a plan can be recomputed exactly), how far the job got, what it answered,
and which plan the data plane must run. Exactly one plan may be active (a partial unique
constraint), and config versions never repeat (a unique column, assigned under a row lock).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q


class WorkloadSource(models.TextChoices):
    TRACE = "trace", "Uploaded trace"
    SCENARIO = "scenario", "Scenario workload"
    TELEMETRY = "telemetry", "Live telemetry window"


class WorkloadProfile(models.Model):
    """A workload to plan for: an uploaded trace (kept as text, so any worker can read it), a
    scenario's own workload, or a window of live telemetry records turned into a trace."""

    name = models.CharField(max_length=120)
    source = models.CharField(max_length=16, choices=WorkloadSource.choices)
    scenario = models.CharField(max_length=120, blank=True, help_text="scenario fixture file")
    trace_format = models.CharField(max_length=16, blank=True)
    trace = models.TextField(blank=True, help_text="the trace as uploaded (JSON lines or CSV)")
    requests = models.PositiveIntegerField(default=0)
    stats = models.JSONField(default=dict, blank=True)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.source})"

    def clean(self) -> None:
        if self.source == WorkloadSource.TRACE and not self.trace:
            raise ValidationError({"trace": "A trace workload needs the trace's content."})
        if self.source == WorkloadSource.SCENARIO and not self.scenario:
            raise ValidationError({"scenario": "A scenario workload names its scenario."})


class PlanStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class JobState(models.Model):
    """What a plan and a sweep (jobs a worker computes) share: the status, a progress message,
    a readable error, who asked, and when it was asked, started and finished."""

    status = models.CharField(
        max_length=16, choices=PlanStatus.choices, default=PlanStatus.QUEUED, db_index=True
    )
    message = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class Plan(JobState):
    """One planning job and its result; an activated plan carries its config version.

    ``inputs`` snapshots everything the planner read (the scenario file's text and the
    workload's id), so re-running the job gives the same plan even if the fixture changes.
    ``result`` is ``pdd_core.planner`` ``Plan.to_dict()`` (or ``Infeasible.to_dict()``).
    """

    scenario = models.CharField(max_length=120, help_text="scenario fixture file")
    workload = models.ForeignKey(
        WorkloadProfile, null=True, blank=True, on_delete=models.PROTECT, related_name="plans"
    )
    inputs = models.JSONField(default=dict)
    progress = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    version = models.PositiveIntegerField(null=True, blank=True, unique=True)
    active = models.BooleanField(default=False)
    activated_by = models.CharField(max_length=150, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["active"], condition=Q(active=True), name="plan_only_one_active"
            ),
            models.CheckConstraint(condition=Q(progress__lte=100), name="plan_progress_le_100"),
            models.CheckConstraint(
                condition=Q(active=False) | Q(version__isnull=False),
                name="plan_active_has_version",
            ),
        ]

    def __str__(self) -> str:
        return f"plan {self.pk} ({self.scenario}, {self.status})"

    @property
    def feasible(self) -> bool:
        return bool(self.result and self.result.get("feasible"))

    @property
    def activatable(self) -> bool:
        return self.status == PlanStatus.DONE and self.feasible and not self.active


class Sweep(JobState):
    """A capacity sweep: one ``pdd_core.sweep`` point per (scenario, WAN bandwidth, policy), each
    its own Celery task, gathered into one table.

    ``inputs`` snapshots the scenario files' text (so a worker recomputes exactly what was asked,
    whatever happens to the fixtures), the points in table order and the bisection steps.
    ``rows`` is the table: ``SweepRow.to_dict()`` per point, in the points' order. The status
    values are the plans' (queued, running, done, failed), with the same meaning.
    """

    inputs = models.JSONField(default=dict)
    points = models.PositiveIntegerField(default=0)
    done_points = models.PositiveIntegerField(default=0)
    rows = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(done_points__lte=F("points")), name="sweep_done_le_points"
            ),
        ]

    def __str__(self) -> str:
        return f"sweep {self.pk} ({self.points} points, {self.status})"

    @property
    def progress(self) -> int:
        """Percent of the points computed."""
        return (
            100 if self.status == PlanStatus.DONE else 100 * self.done_points // max(self.points, 1)
        )
