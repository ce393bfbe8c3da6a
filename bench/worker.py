"""One measurement in a fresh interpreter: run ``code`` with ``argv`` against the ``pdd_core``
found at ``pythonpath`` and return the JSON object its last line of output prints.

A fresh process per measurement keeps one run's memory and caches out of the next one's
figures; ``sim_speed.py`` and ``bench_sim_memory.py`` both measure this way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_json(code: str, argv: list[str], pythonpath: Path) -> dict[str, Any]:
    """The last stdout line of ``python -c code *argv`` (cwd and PYTHONPATH ``pythonpath``),
    parsed; RuntimeError with the last stderr line when it fails."""
    out = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=pythonpath,
        env=dict(os.environ, PYTHONPATH=str(pythonpath)),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "failed")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result
