"""Writes of the planning app: workload profiles, plan requests, job progress, activation.

The planner is ``pdd_core.planner``; these services only turn stored inputs into its inputs,
persist its answers and keep the invariants (one active plan, monotonically increasing config
versions, a failed or unfinished plan never activated). Jobs are queued on commit, so a worker
never looks for a plan whose row is not visible yet.
"""

from __future__ import annotations

import io
import math
import tempfile
import tomllib
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from controlplane.core.broadcast import CONFIG_GROUP, broadcast
from controlplane.core.exceptions import ConflictError
from controlplane.planning.jobs import job_enqueue, job_failed, job_started
from controlplane.planning.models import Plan, PlanStatus, WorkloadProfile, WorkloadSource
from controlplane.planning.selectors import SCENARIO_DIR, scenario_names
from pdd_core.agent.desired import not_enacted_reason
from pdd_core.planner import PlannerInputs, inputs_from_scenario
from pdd_core.planner.design import FAMILIES
from pdd_core.scenario import Scenario, load_scenario, scenario_from_dict
from pdd_core.workload import Request, TraceFormatError, read_trace, trace_stats, write_mooncake

# Tokens per block hash of the traces the control plane stores (Mooncake's 512, and
# ``requests_from_telemetry`` chains telemetry records in blocks of this size).
STATS_BLOCK_SIZE = 512
# A plan's job (``tasks.plan_compute_task``), queued by name: tasks import this module.
PLAN_COMPUTE_TASK = "planning.plan_compute"


def max_trace_bytes() -> int:
    return int(settings.WORKLOAD_MAX_BYTES)


def _parse_trace(content: bytes, filename: str) -> list[Request]:
    """Read an uploaded trace with ``pdd_core.workload.read_trace``; errors name the line."""
    if len(content) > max_trace_bytes():
        raise ValidationError(
            {"file": [f"The trace is {len(content)} bytes; the limit is {max_trace_bytes()}."]}
        )
    suffix = ".csv" if filename.lower().endswith(".csv") else ".jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(content)
        try:
            trace = read_trace(path)
        except TraceFormatError as exc:
            raise ValidationError(
                {"file": [f"line {exc.line}: {exc.field}: {exc.reason}"]}
            ) from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValidationError({"file": [f"not a readable trace: {exc}"]}) from None
    if not trace.requests:
        raise ValidationError({"file": ["The trace holds no requests."]})
    return sorted(trace.requests, key=lambda r: r.arrival_s)


def _stats(requests: list[Request]) -> dict[str, Any]:
    """``pdd_core.workload.trace_stats`` of the profile (what ``pdd trace stats --json`` prints),
    with an infinite cache of ``STATS_BLOCK_SIZE``-token blocks."""
    return trace_stats(requests, block_size=STATS_BLOCK_SIZE).to_dict()


def _scenario_path(scenario: str) -> Path:
    """The fixture file of a known scenario (an unknown name is a validation error)."""
    if scenario not in scenario_names():
        raise ValidationError({"scenario": [f"Unknown scenario {scenario!r}."]})
    return SCENARIO_DIR / scenario


def _profile_create(
    name: str, source: str, requests: list[Request], created_by: str, **columns: Any
) -> WorkloadProfile:
    """Store a workload profile of ``requests`` with its statistics (``_stats``)."""
    return WorkloadProfile.objects.create(
        name=name, source=source, requests=len(requests), stats=_stats(requests),
        created_by=created_by, **columns,
    )  # fmt: skip


@transaction.atomic
def workload_create_from_trace(
    *, name: str, content: bytes, filename: str, created_by: str = ""
) -> WorkloadProfile:
    """Store an uploaded trace after reading it fully (format errors are 400s by line)."""
    requests = _parse_trace(content, filename)
    return _profile_create(
        name, WorkloadSource.TRACE, requests, created_by,
        trace_format="azure" if filename.lower().endswith(".csv") else "jsonl",
        trace=content.decode("utf-8"),
    )  # fmt: skip


@transaction.atomic
def workload_create_from_scenario(
    *, name: str, scenario: str, created_by: str = ""
) -> WorkloadProfile:
    """A profile that stands for a scenario fixture's own workload."""
    requests = load_scenario(_scenario_path(scenario)).workload.requests()
    return _profile_create(name, WorkloadSource.SCENARIO, requests, created_by, scenario=scenario)


def requests_from_telemetry(
    records: list[Any], block_size: int = STATS_BLOCK_SIZE
) -> list[Request]:
    """Telemetry rows -> requests whose block hashes reproduce each row's reported hit.

    Agents report hit tokens, not hashes; each tenant's rows are chained so that a row's first
    ``hit // block_size`` blocks are the previous row's, which a prefix cache then hits.
    """
    if not records:
        return []
    start = records[0].arrival_time
    fresh = iter(range(1, 1 << 62))
    last: dict[str, tuple[int, ...]] = {}
    result = []
    for row in records:
        previous = last.get(row.tenant, ())
        keep = min(row.hit_tokens // block_size, len(previous))
        blocks = math.ceil(max(row.input_tokens, 1) / block_size)
        hashes = previous[:keep] + tuple(next(fresh) for _ in range(blocks - keep))
        last[row.tenant] = hashes
        result.append(
            Request(
                id=row.request_id,
                arrival_s=round((row.arrival_time - start).total_seconds(), 3),
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                block_hashes=hashes,
                session=row.tenant,
                tenant=row.tenant,
            )
        )
    return result


@transaction.atomic
def workload_create_from_telemetry(
    *, name: str, minutes: int, created_by: str = ""
) -> WorkloadProfile:
    """A trace built from the last ``minutes`` of live telemetry records."""
    from controlplane.telemetry.models import RequestRecord

    end = timezone.now()
    begin = end - timedelta(minutes=minutes)
    # finish_time >= arrival_time (validated at ingestion): the bound on finish_time selects
    # the same rows and lets PostgreSQL read only the days' partitions from ``begin`` on, by
    # their finish_time index, instead of every partition of the retention.
    window = {"arrival_time__gte": begin, "arrival_time__lt": end, "finish_time__gte": begin}
    rows = list(
        RequestRecord.objects.filter(**window, rejected=False)
        .order_by("arrival_time", "id")
        .only("request_id", "tenant", "arrival_time", "input_tokens", "hit_tokens", "output_tokens")
    )
    if not rows:
        raise ValidationError({"minutes": [f"No telemetry records in the last {minutes} minutes."]})
    requests = requests_from_telemetry(rows)
    out = io.StringIO()
    write_mooncake(requests, out)
    return _profile_create(
        name, WorkloadSource.TELEMETRY, requests, created_by,
        trace_format="jsonl", trace=out.getvalue(), window_start=begin, window_end=end,
    )  # fmt: skip


@transaction.atomic
def plan_request(
    *, scenario: str, workload: WorkloadProfile | None = None, requested_by: str = ""
) -> Plan:
    """Create a queued plan with its inputs snapshot and queue its job once committed."""
    text = _scenario_path(scenario).read_text(encoding="utf-8")
    plan = Plan.objects.create(
        scenario=scenario,
        workload=workload,
        inputs={
            "scenario": scenario,
            "scenario_toml": text,
            "workload_id": workload.pk if workload else None,
        },
        requested_by=requested_by,
    )
    plan_id = plan.pk
    transaction.on_commit(lambda: job_enqueue(Plan, plan_id, PLAN_COMPUTE_TASK))
    return plan


def planner_inputs(plan: Plan) -> PlannerInputs:
    """Rebuild the planner's inputs from the plan's snapshot (deterministic), recommending only
    designs this plane's agents can run (``enactable``)."""
    return enactable(_scenario_inputs(plan))


def enactable(inputs: PlannerInputs) -> PlannerInputs:
    """``inputs`` whose plan recommends a design of a family this plane enacts (its agents run
    disaggregated roles: ``pdd_core.agent.desired.not_enacted_reason``), of those the scenario
    allows. Every family is still searched and compared: the plan's reasons and verdict name a
    cheaper design the plane cannot run."""
    runs = tuple(f for f in FAMILIES if not_enacted_reason(f) is None)
    allowed = tuple(f for f in inputs.settings.recommend if f in runs) or runs
    return replace(inputs, settings=replace(inputs.settings, recommend=allowed))


def _scenario_inputs(plan: Plan) -> PlannerInputs:
    raw = tomllib.loads(plan.inputs["scenario_toml"])
    scenario: Scenario = scenario_from_dict(raw, base_dir=SCENARIO_DIR)
    workload = plan.workload
    if workload is None or workload.source == WorkloadSource.SCENARIO:
        if workload is not None and workload.scenario != plan.scenario:
            scenario_w = load_scenario(SCENARIO_DIR / workload.scenario)
            return inputs_from_scenario(
                scenario,
                scenario_w.workload.requests(),
                closed_loop=scenario_w.config.closed_loop,
            )
        return inputs_from_scenario(scenario)
    filename = "trace.csv" if workload.trace_format == "azure" else "trace.jsonl"
    # An uploaded or recorded trace is replayed at its own arrival times (open loop).
    requests = _parse_trace(workload.trace.encode(), filename)
    return inputs_from_scenario(scenario, requests, closed_loop=False)


def plan_started(plan_id: int) -> bool:
    """Mark a queued (or retried) plan running; False when it is already done (idempotent)."""
    return job_started(Plan, plan_id, progress=0)


def plan_progress(plan_id: int, percent: int, message: str = "") -> None:
    """Record progress, never moving it backwards (parallel verifications report out of order)."""
    percent = max(0, min(100, percent))
    Plan.objects.filter(pk=plan_id, progress__lt=percent, status=PlanStatus.RUNNING).update(
        progress=percent, message=message[:200]
    )


def plan_progress_step(plan_id: int, points: int, cap: int = 90) -> None:
    """Add ``points`` of progress atomically (one finished verification of a Celery group)."""
    Plan.objects.filter(pk=plan_id, status=PlanStatus.RUNNING, progress__lte=cap - points).update(
        progress=F("progress") + points
    )


def plan_finished(plan_id: int, result: dict[str, Any]) -> None:
    Plan.objects.filter(pk=plan_id).update(
        status=PlanStatus.DONE,
        progress=100,
        result=result,
        message="done" if result.get("feasible") else "infeasible",
        finished_at=timezone.now(),
    )


def plan_failed(plan_id: int, error: str) -> None:
    """Leave a readable error; a done plan stays done."""
    job_failed(Plan, plan_id, error)


@transaction.atomic
def plan_activate(*, plan: Plan, activated_by: str = "") -> Plan:
    """Make ``plan`` the active one with the next config version; archive the previous one.

    409 when the plan is not done, is infeasible, or is already active. Versions come from the
    largest ever assigned, read under a lock on the versioned rows, so they only grow.
    """
    locked = Plan.objects.select_for_update().get(pk=plan.pk)
    if locked.status != PlanStatus.DONE:
        raise ConflictError(
            f"Plan {locked.pk} is {locked.status}; only a done plan can be activated."
        )
    if not locked.feasible:
        raise ConflictError(f"Plan {locked.pk} found no feasible deployment; nothing to activate.")
    if locked.active:
        raise ConflictError(f"Plan {locked.pk} is already active (version {locked.version}).")
    list(Plan.objects.select_for_update().filter(version__isnull=False).values_list("pk"))
    now = timezone.now()
    Plan.objects.filter(active=True).update(active=False, archived_at=now)
    top = Plan.objects.aggregate(top=Max("version"))["top"] or 0
    locked.version = top + 1
    locked.active = True
    locked.activated_at = now
    locked.activated_by = activated_by
    locked.save(update_fields=["version", "active", "activated_at", "activated_by"])
    payload = {"event": "config.activated", "version": locked.version, "plan": locked.pk}
    transaction.on_commit(lambda: broadcast(CONFIG_GROUP, payload, force=True))
    return locked
