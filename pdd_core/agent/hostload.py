"""How long a live run's processes waited for a CPU: the host's share of a live timing.

A live plane on one machine is timed by that machine: when other work holds the CPUs, every
hop of a request (HTTP intake, a frame read, the first token's way back) waits in the run
queue before it runs, and its TTFT grows by waits the system under test did not cause. Linux
counts them per thread in ``/proc/<pid>/task/<tid>/schedstat``: nanoseconds on a CPU,
nanoseconds runnable but waiting for one, and the number of times the thread was scheduled
in. ``sample`` reads them for a set of processes; the difference of two samples says how long
those processes waited per time slice over the interval, the figure ``pdd parity`` prints and
its test gates on. A thread that exits between the samples drops out of the difference (its
last interval is not counted).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Sched:
    """CPU time, run-queue wait and time slices of some threads over ``wall_s`` seconds."""

    cpu_s: float = 0.0
    wait_s: float = 0.0
    slices: int = 0
    wall_s: float = 0.0

    @property
    def wait_per_slice_ms(self) -> float:
        """Mean wait for a CPU each time a thread became runnable, in milliseconds."""
        return 1000 * self.wait_s / self.slices if self.slices else 0.0


@dataclass(frozen=True, slots=True)
class Sample:
    """When (``time.monotonic``), and each thread's (cpu ns, wait ns, slices) by (pid, tid)."""

    at: float
    threads: dict[tuple[int, int], tuple[int, int, int]]


def sample(pids: Iterable[int]) -> Sample | None:
    """Every thread's counters of ``pids``; None where the kernel does not give them."""
    found: dict[tuple[int, int], tuple[int, int, int]] = {}
    for pid in pids:
        try:
            tasks = list((PROC / str(pid) / "task").iterdir())
        except OSError:
            continue  # the process has exited
        for task in tasks:
            try:
                fields = (task / "schedstat").read_text().split()
            except FileNotFoundError:
                continue
            except OSError:
                return None
            if len(fields) < 3:
                return None
            found[(pid, int(task.name))] = (int(fields[0]), int(fields[1]), int(fields[2]))
    return Sample(time.monotonic(), found) if found else None


def between(before: Sample | None, after: Sample | None) -> Sched | None:
    """What the threads of ``after`` did since ``before`` (a thread new since then counts from
    its start); None when either sample is missing."""
    if before is None or after is None:
        return None
    cpu = wait = slices = 0
    for key, (c, w, s) in after.threads.items():
        c0, w0, s0 = before.threads.get(key, (0, 0, 0))
        if c < c0 or s < s0:  # the thread id was reused: a new thread
            c0 = w0 = s0 = 0
        cpu, wait, slices = cpu + c - c0, wait + w - w0, slices + s - s0
    return Sched(cpu / 1e9, wait / 1e9, slices, after.at - before.at)
