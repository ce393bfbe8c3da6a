"""A real ``manage.py run_demo`` in a process group of its own, for the tests that drive it.

On the embedded defaults (SQLite and in-memory channels under its own ``PDD_DATA_DIR``), on two
free ports the system hands out (never the README's 8000 and 8001, which a developer's own demo
or another test may hold or take meanwhile); ``bash`` rewrites the README's addresses to them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.live_server import free_port

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable  # the README's `.venv/bin/python`: this run's interpreter (3.11 or 3.12)


class Demo:
    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.gateway_port = free_port()
        while self.gateway_port == self.port:
            self.gateway_port = free_port()
        self.env = {**os.environ, "PDD_DATA_DIR": str(data_dir)}
        for name in ("DATABASE_URL", "REDIS_URL"):  # the embedded defaults, as a newcomer has
            self.env.pop(name, None)
        self.log = data_dir / "run_demo.out"
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *options: str, timeout_s: float = 240.0) -> str:
        """Start ``run_demo`` (no scripted incident unless ``options`` ask for one); its key."""
        data = self.data_dir
        data.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "run_demo", "--port", str(self.port),
                 "--gateway-port", str(self.gateway_port),
                 *(options or ("--incident-after", "-1"))],
                cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            key = re.search(r"API key:\s+(\S+)", text)
            if key:
                return key.group(1)
            if self.proc.poll() is not None:
                pytest.fail(f"run_demo exited:\n{text}")
            time.sleep(0.5)
        pytest.fail(f"run_demo printed no key in {timeout_s} s:\n{self.log.read_text()}")

    def bash(self, command: str) -> str:
        command = command.replace("127.0.0.1:8001", f"127.0.0.1:{self.gateway_port}")
        command = command.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        command = command.replace(".venv/bin/python", PYTHON)
        done = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=self.env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def tracebacks(self) -> list[str]:
        """Every traceback line in the demo's logs (each one is a bug)."""
        return [
            f"{log.name}: {line}"
            for log in sorted((self.data_dir / "demo").rglob("*.log"))
            for line in log.read_text(errors="replace").splitlines()
            if "Traceback (most recent call last)" in line
        ]

    def interrupt(self) -> int:
        """Ctrl-C in a terminal: SIGINT to the whole process group, every child included."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout=60)


@contextmanager
def running_demo(data_dir: Path) -> Iterator[Demo]:
    """A ``Demo`` stopped (SIGTERM, then SIGKILL) when the block ends, whatever happened."""
    running = Demo(data_dir)
    try:
        yield running
    finally:
        if running.proc is not None and running.proc.poll() is None:
            os.killpg(running.proc.pid, signal.SIGTERM)  # run_demo stops its children on SIGTERM
            try:
                running.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(running.proc.pid, signal.SIGKILL)
                running.proc.wait(timeout=30)
