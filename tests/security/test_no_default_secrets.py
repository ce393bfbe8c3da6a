"""No data-plane secret has a default: the WAN line's control token is generated per plane
(``pdd up``) or given as a secret, never written in a file the project ships."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_core.agent.config import ConfigError, WanSpec, config_from_dict

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [*sorted((ROOT / "fixtures" / "dataplane").glob("*.json")),
           ROOT / "deploy" / "kubernetes" / "site-agents" / "dataplane.json"]  # fmt: skip


def test_no_shipped_file_or_module_holds_a_wan_token() -> None:
    for path in [*SHIPPED, *sorted((ROOT / "pdd_core").rglob("*.py")),
                 *sorted((ROOT / "deploy").rglob("*.yaml"))]:  # fmt: skip
        assert "pdd-demo-wan" not in path.read_text(), path
    for path in SHIPPED:
        assert "control_token" not in json.loads(path.read_text()).get("wan", {}), path
    assert "control_token" not in WanSpec.__dataclass_fields__


def test_a_configuration_with_a_wan_token_in_it_is_refused() -> None:
    raw = json.loads((ROOT / "fixtures" / "dataplane" / "tiny.json").read_text())
    raw["wan"]["control_token"] = "pdd-demo-wan"

    with pytest.raises(ConfigError, match=r"wan\.control_token"):
        config_from_dict(raw)


def test_the_wan_line_does_not_start_without_its_token() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDD_WAN_TOKEN")}
    result = subprocess.run(
        [sys.executable, "-m", "pdd_core", "agent", "--role", "wan",
         "--config", str(ROOT / "fixtures" / "dataplane" / "tiny.json")],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 2
    assert "PDD_WAN_TOKEN_FILE: not set" in result.stdout
