"""The README's quick start, run as written against a real ``manage.py run_demo``.

The commands are read from README.md itself (the gateway ``curl`` of step 3, the token and API
``curl`` of step 4) and run by bash with only the placeholders filled in (``<key>`` from the
demo's banner, ``<token>`` from the previous command's last line); the ports are the README's
8000 and 8001 unless something already listens there, then two free ones. Then Ctrl-C (SIGINT to
the process group, as a terminal sends it) stops the demo, and no log may hold a traceback.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.demo_process import ROOT, Demo, running_demo

README = (ROOT / "README.md").read_text(encoding="utf-8")

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


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "var") as running:
        yield running


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
    assert demo.tracebacks() == []
