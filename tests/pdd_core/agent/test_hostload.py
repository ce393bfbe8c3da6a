"""``hostload``: the run-queue wait of a set of processes, read from Linux's per-thread
schedstat, and the line ``pdd parity`` prints it in (the parity test's gate reads it)."""

from __future__ import annotations

import os
import re
import threading

import pytest

from pdd_core.agent import hostload
from pdd_core.agent.hostload import Sched
from pdd_core.agent.parity import host_line

linux = pytest.mark.skipif(
    not os.path.exists(f"/proc/{os.getpid()}/task"), reason="needs Linux's /proc"
)


def spin(n: int) -> int:
    return sum(i * i for i in range(n))


@linux
def test_the_difference_counts_the_cpu_time_and_slices_of_every_thread_since() -> None:
    sampled = threading.Event()

    def work() -> None:
        spin(300_000)
        sampled.wait()  # alive at the second sample

    before = hostload.sample([os.getpid()])
    worker = threading.Thread(target=work)
    worker.start()  # a thread started after the first sample counts from its start
    spin(300_000)
    after = hostload.sample([os.getpid()])
    sampled.set()
    worker.join()

    waited = hostload.between(before, after)

    assert waited is not None
    assert waited.cpu_s > 0 and waited.slices > 0 and waited.wall_s > 0
    assert waited.wait_s >= 0
    assert after is not None and len(after.threads) >= 2


@linux
def test_processes_that_are_gone_give_no_sample() -> None:
    assert hostload.sample([2**22 + 7]) is None  # above the default pid_max
    assert hostload.between(None, hostload.sample([os.getpid()])) is None


def test_the_line_gives_the_wait_per_slice_the_gate_reads() -> None:
    line = host_line(Sched(cpu_s=2.0, wait_s=0.5, slices=1000, wall_s=30.0))
    unmeasured = host_line(None)

    found = re.search(r"host CPU wait: ([\d.]+) ms per time slice", line)
    assert found is not None and float(found.group(1)) == pytest.approx(0.5)
    assert "not measured" in unmeasured and "ms per time slice" not in unmeasured
