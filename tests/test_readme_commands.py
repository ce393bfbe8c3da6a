"""The README's quick start, run as written against a real ``manage.py run_demo``.

The commands are read from README.md itself (the gateway ``curl`` of step 3, the token and API
``curl`` of step 4) and run by bash with only the placeholders filled in (``<key>`` from the
demo's banner, ``<token>`` from the previous command's last line); the ports are the README's
8000 and 8001 unless something already listens there, then two free ones. Then Ctrl-C (SIGINT to
the process group, as a terminal sends it) stops the demo, and no log may hold a traceback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON = ".venv/bin/python" if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable

pytestmark = pytest.mark.system


def _gateway_curl() -> str:
    """The fenced block of quick-start step 3."""
    step = README.index("3. Open <http://127.0.0.1:8000/>")
    start = README.index("```\n", step) + 4
    return textwrap.dedent(README[start : README.index("```", start)]).strip()


def _inline(pattern: str) -> str:
    """The inline code span of the quick start that matches ``pattern``."""
    quick = README[README.index("## Quick start") : README.index("## Tests")]
    quick = re.sub(r"```.*?```", "", quick, flags=re.S)  # fenced blocks are not inline spans
    spans = [s for s in re.findall(r"`([^`]+)`", quick) if re.search(pattern, s)]
    assert len(spans) == 1, spans
    return spans[0]


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Demo:
    def __init__(self, data_dir: Path) -> None:
        self.port, self.gateway_port = 8000, 8001
        if not (_free(8000) and _free(8001)):
            self.port, self.gateway_port = _free_port(), _free_port()
        self.env = {**os.environ, "PDD_DATA_DIR": str(data_dir)}
        for name in ("DATABASE_URL", "REDIS_URL"):  # the embedded defaults, as a newcomer has
            self.env.pop(name, None)
        self.log = data_dir / "run_demo.out"
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 240.0) -> str:
        data = self.data_dir
        data.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "run_demo", "--port", str(self.port),
                 "--gateway-port", str(self.gateway_port), "--incident-after", "-1"],
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

    def interrupt(self) -> int:
        """Ctrl-C in a terminal: SIGINT to the whole process group, every child included."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout=60)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = Demo(tmp_path / "var")
    yield running
    if running.proc is not None and running.proc.poll() is None:
        os.killpg(running.proc.pid, signal.SIGTERM)  # run_demo stops its children on SIGTERM
        try:
            running.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(running.proc.pid, signal.SIGKILL)
            running.proc.wait(timeout=30)


def _json(text: str) -> Any:
    return json.loads(text)


def test_the_quick_start_commands_work_as_written_and_ctrl_c_is_clean(demo: Demo) -> None:
    key = demo.start()

    completion = _json(demo.bash(_gateway_curl().replace("<key>", key)))
    token_output = demo.bash(_inline(r"create_token --name me --scope operator"))
    token = token_output.strip().splitlines()[-1]
    pools = _json(demo.bash(_inline(r"/api/v1/instance-pools/").replace("<token>", token)))
    invoice_path = _inline(r"^/api/v1/billing/invoices/demo/").replace(
        "<YYYY-MM>", time.strftime("%Y-%m")
    )
    invoice = _json(demo.bash(
        f'curl -s -H "Authorization: Bearer {token}" http://127.0.0.1:8000{invoice_path}'
    ))  # fmt: skip
    status = demo.interrupt()

    assert completion["object"] == "text_completion"
    assert completion["usage"]["completion_tokens"] == 8
    assert token.startswith("pdd_")
    assert pools["count"] == 3
    assert invoice.get("tenant") == "demo", invoice
    assert status == 0
    assert "run_demo: stopped" in demo.log.read_text()
    logs = sorted((demo.data_dir / "demo").rglob("*.log"))
    assert {"daphne.log", "gateway.log", "md-0.log"} <= {log.name for log in logs}
    tracebacks = [
        f"{log.name}: {line}"
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
        if "Traceback (most recent call last)" in line
    ]
    assert tracebacks == []
