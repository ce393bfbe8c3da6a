"""``pdd up --desired FILE`` (no control plane): the sites' reconcilers follow a desired-state
file, re-read as it changes; requests keep being served across the change."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pdd_core.agent.config import ProcessRole
from pdd_core.agent.desired import DesiredPool, DesiredState
from pdd_core.agent.supervisor.members import terminate
from tests.live_server import ROOT, pdd_command, up_banner
from tests.system.conftest import wait_until

pytestmark = pytest.mark.system


def sites(prefill: int, relay: int, main: int) -> list[dict[str, Any]]:
    def pool(role: ProcessRole, chip: str, count: int) -> DesiredPool:
        return DesiredPool(role=role, chip=chip, instances=count, tp=1)

    a = DesiredState("dc-a", 1, 1, 10.0, (pool(ProcessRole.PREFILL, "h800", prefill),
                                          pool(ProcessRole.RELAY, "h800", relay)))  # fmt: skip
    b = DesiredState("dc-b", 1, 1, 10.0, (pool(ProcessRole.MAIN, "h20", main),))
    return [a.to_dict(), b.to_dict()]


def running(gateway: str) -> Counter[str]:
    """Agents per role the gateway reaches and routes to (serving)."""
    with urllib.request.urlopen(gateway + "/health", timeout=2) as response:
        health = json.loads(response.read())
    return Counter(agent.split("-")[0] for agent, state in health["states"].items()
                   if state == "serving" and health["agents"][agent])  # fmt: skip


def complete(gateway: str, key: str, prompt: str) -> int:
    request = urllib.request.Request(
        gateway + "/v1/completions",
        data=json.dumps({"prompt": prompt, "max_tokens": 8}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def test_the_plane_follows_its_desired_file(tmp_path: Path) -> None:
    desired = tmp_path / "desired.json"
    desired.write_text(json.dumps(sites(1, 2, 1)))
    up = subprocess.Popen(
        pdd_command("up", str(ROOT / "fixtures/dataplane/tiny.json"), "--run-dir",
                    str(tmp_path / "run"), "--desired", str(desired)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        seen = up_banner(up, timeout_s=90)
        gateway, key = seen["gateway"], seen["api key"]
        assert wait_until(lambda: running(gateway) == {"p": 1, "rld": 2, "md": 1}, 60)
        assert complete(gateway, key, "one design") == 200
        desired.write_text(json.dumps(sites(2, 0, 2)))  # no relay pool: P-MD only
        assert wait_until(lambda: running(gateway) == {"p": 2, "md": 2}, 60)
        statuses = [complete(gateway, key, f"another design {n}") for n in range(4)]
    finally:
        terminate(up, grace_s=30)

    assert statuses == [200] * 4
