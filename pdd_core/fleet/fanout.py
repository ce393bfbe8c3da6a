"""Fanning a phase's tasks out: in this process, or over a pool of worker processes.

A *mapper* runs ``fn(*args)`` for each argument tuple and returns the results in order. The
fleet planner's tasks (``fleet.plan``) take and return plain data, so the same tasks run under
``serial_map`` (tests, one core), ``process_map`` (``pdd plan --workers N``) or a Celery group
(the control plane), unchanged.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

Mapper = Callable[[Callable[..., Any], Sequence[tuple[Any, ...]]], list[Any]]


def serial_map(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    return [fn(*args) for args in calls]


def process_map(workers: int) -> Mapper:
    """A mapper over ``workers`` fresh worker processes per phase (spawned, so a worker holds
    only what its tasks load: its peak memory is theirs)."""
    if workers < 1:
        raise ValueError(f"workers: must be at least 1, got {workers!r}")

    def run(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
        if workers == 1:
            return serial_map(fn, calls)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [pool.submit(fn, *args) for args in calls]
            return [f.result() for f in futures]

    return run
