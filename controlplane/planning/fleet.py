"""The fleet planner's tasks on Celery: each phase of ``pdd_core.fleet.plan`` as one group.

``fleet_part_task(phase, args)`` runs one task of a phase (a tenant's day, a demand's
analytic screen, a demand's search and sizing) on a worker; ``celery_map`` is the fleet
planner's mapper that sends a phase as a Celery group and waits for it, so ``plan_fleet`` runs
unchanged with its work spread over every worker (in-process when tasks are eager, the
embedded default). The tasks take the fleet file's tables, not its path, so a worker on another
machine needs no copy of the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from celery import current_task, group, shared_task

from pdd_core.fleet.plan import day_task, demand_task, screen_task

PHASES: dict[str, Callable[..., dict[str, Any]]] = {
    "day": day_task,
    "screen": screen_task,
    "demand": demand_task,
}
NAMES = {fn: name for name, fn in PHASES.items()}
# A phase waits at most this long for its group (a demand's search takes minutes on one core).
PHASE_TIMEOUT_S = 3600


@shared_task(name="planning.fleet_part")
def fleet_part_task(phase: str, args: list[Any]) -> dict[str, Any]:
    """One task of one phase of a fleet plan."""
    if phase not in PHASES:
        raise ValueError(f"phase: one of {', '.join(PHASES)}, got {phase!r}")
    return PHASES[phase](*args)


def celery_map(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Run ``fn(*args)`` for every call as one Celery group; the results in call order.

    Called from a command or a web process, never from inside a task (a task waiting on a
    group could hold the worker its members need)."""
    phase = NAMES.get(fn)
    if phase is None:
        raise ValueError(f"{getattr(fn, '__name__', fn)!r} is not a fleet planner task")
    if current_task and not current_task.request.is_eager:
        raise RuntimeError("celery_map: call it from a command or a web process, not a task")
    job = group(fleet_part_task.s(phase, list(args)) for args in calls).apply_async()
    # Celery's own guard against waiting inside a task reads a process-wide flag, which the
    # whole test suite was seen to leave set outside any task (CI: "Never call result.get()
    # within a task!"); the check above is the same guard, on this call's own context.
    results: list[Any] = job.get(timeout=PHASE_TIMEOUT_S, disable_sync_subtasks=False)
    return results
