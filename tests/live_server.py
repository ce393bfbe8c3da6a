"""A real daphne process serving the test database, for browser and system tests.

The server is a separate process (as in production), so it sees only committed data: tests that
use it need ``django_db(transaction=True)``. SQLite test databases are files for this reason.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def pdd_command(*args: str) -> list[str]:
    """The argv of a ``pdd`` command run with this interpreter (``python -m pdd_core ...``)."""
    return [sys.executable, "-m", "pdd_core", *args]


def up_banner(proc: subprocess.Popen[str], timeout_s: float) -> dict[str, str]:
    """What ``pdd up`` printed about its plane (``gateway``, ``api key``, ``pids``, ...): its
    ``key: value`` lines, read until the ``pids`` line, end of output or ``timeout_s``."""
    seen: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while "pids" not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        key, _, value = line.partition(": ")
        seen[key.strip()] = value.strip()
    return seen


def database_url(settings_dict: dict[str, Any]) -> str:
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    at = "@" if user else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{user}{password}{at}{host}{port}/{settings_dict['NAME']}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``daphne controlplane.asgi:application`` on 127.0.0.1:port; can be stopped and restarted."""

    def __init__(self, db_url: str, data_dir: Path, log: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "DATABASE_URL": db_url, "PDD_DATA_DIR": str(data_dir)}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
                 "controlplane.asgi:application"],
                cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited early:\n{self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"daphne did not start within {timeout_s} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
