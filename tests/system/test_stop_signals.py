"""An agent told to stop twice (the supervisor's SIGTERM and the parent-death SIGTERM of the
thread that spawned it can land together) exits 0 and logs no traceback: the second signal
reached asyncio's wakeup pipe after the loop had closed it (``BrokenPipeError`` in CI)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.system.conftest import TINY, start_plane, tracebacks

pytestmark = pytest.mark.system


def test_a_second_sigterm_during_shutdown_is_ignored(tmp_path: Path) -> None:
    plane = start_plane(tmp_path, TINY)
    try:
        children = dict(plane.children)
        for child in children.values():
            child.send_signal(signal.SIGTERM)
        for pause_s in (0.0, 0.002, 0.01, 0.05):
            time.sleep(pause_s)
            for child in children.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
        codes = {agent: child.wait(timeout=15) for agent, child in children.items()}
    finally:
        plane.stop()
    assert codes == dict.fromkeys(children, 0)
    assert tracebacks(plane.run_dir) == []
