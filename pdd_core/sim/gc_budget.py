"""Fewer garbage collections while simulations run: a process-wide setting, taken and released
by every run (reference-counted, so concurrent runs in threads leave the setting as they found
it once the last one ends).

A run allocates an event tuple and a closure per event, a flight and its sequences per request,
and most of them die young. CPython collects its youngest generation every 700 allocations of
container objects, and each collection also walks the in-flight state that survives, then
promotes it so that older generations fill and are collected in turn: on the Mooncake bench
trace that was 3-12% of a PDD run's CPU time. Collecting every ``RUN_GEN0_THRESHOLD``
allocations instead does the same work on far fewer occasions (mypy raises its threshold the
same way during a build). Collection still happens, so the reference cycles a run leaves are
freed on the same terms, only later; no result depends on when (the simulator holds no weak
references or finalizers). The largest family of cycles, a relayed flight and its sequence, is
broken when the flight finishes (``Simulator._finish``), so the collection at the end of a run
has little left to walk or free.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between collections of the youngest generation while a simulation runs.
RUN_GEN0_THRESHOLD = 100_000

_lock = threading.Lock()
_runs = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the youngest generation's threshold to ``RUN_GEN0_THRESHOLD`` while inside (unless
    collection is off or already rarer); the first run to enter saves the thresholds, the last
    to leave restores them."""
    global _runs, _saved  # noqa: PLW0603 - one process-wide setting, guarded by the lock
    with _lock:
        if _runs == 0:
            _saved = gc.get_threshold()
            first, second, third = _saved
            if 0 < first < RUN_GEN0_THRESHOLD:
                gc.set_threshold(RUN_GEN0_THRESHOLD, second, third)
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
