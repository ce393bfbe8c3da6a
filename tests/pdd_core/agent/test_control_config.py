"""The gateway's side of a config push, and ``pdd up``'s control-plane flags (no processes)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from pdd_core import metrics
from pdd_core.agent.config import load_config
from pdd_core.agent.gateway.api import key_prefix
from pdd_core.agent.gateway.control import load_keys, save_keys
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.cli.up import parse_tokens
from pdd_core.keys import hash_key
from pdd_core.specs import SLA

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "fixtures" / "dataplane" / "tiny.json"
LOCAL = hash_key("local-key")


def gateway(tmp_path: Path) -> Gateway:
    config = load_config(TINY)
    config = replace(
        config.with_ports({}, {"md-0": 1, "md-1": 2}),
        journal_dir=str(tmp_path),
        tenants={LOCAL: "local"},
    )
    return Gateway(config, "gateway")  # not started: no connection is made


def test_a_push_swaps_routing_and_keys_and_ignores_unknown_fields(tmp_path: Path) -> None:
    gw = gateway(tmp_path)
    budget = gw.config.routing.transfer_budget_s
    pushed = {hash_key("tk_ab12_x"): "acme"}

    asyncio.run(
        gw.apply_control_config(
            3, {"routing_table": {"transfer_budget_s": budget * 2, "new": 1}, "tenant_keys": pushed}
        )
    )

    assert gw.config.routing.transfer_budget_s == budget * 2
    assert dict(gw.config.tenants) == pushed  # the control plane's keys replace the file's


def test_an_empty_key_map_keeps_the_local_keys_and_null_keeps_the_table(tmp_path: Path) -> None:
    gw = gateway(tmp_path)
    routing = gw.config.routing
    asyncio.run(gw.apply_control_config(1, {"tenant_keys": {hash_key("k"): "acme"}}))

    asyncio.run(gw.apply_control_config(2, {"routing_table": None, "tenant_keys": {}}))

    assert dict(gw.config.tenants) == {LOCAL: "local"}
    assert gw.config.routing == routing


def test_an_invalid_routing_table_keeps_the_current_one(tmp_path: Path) -> None:
    gw = gateway(tmp_path)
    routing = gw.config.routing

    asyncio.run(gw.apply_control_config(4, {"routing_table": {"transfer_budget_s": "fast"}}))

    assert gw.config.routing == routing


def test_a_push_sets_the_operators_sla_targets_and_the_billed_verdict_follows(
    tmp_path: Path,
) -> None:
    gw = gateway(tmp_path)
    targets = {"ttft_p90_s": 0.5, "ttft_p99_s": 1.5, "tpot_p90_s": 0.02, "tpot_p99_s": 0.04}

    asyncio.run(gw.apply_control_config(5, {"sla": targets}))

    assert gw.config.sla == SLA(**targets)
    # what gateway_types.record_of judges each billed request by
    assert not metrics.request_meets_sla(
        0.8, 0.01, gw.config.sla.ttft_p90_s, gw.config.sla.tpot_p90_s
    )


@pytest.mark.parametrize(
    "sla",
    [
        {"ttft_p90_s": 0.5},  # partial
        {"ttft_p90_s": 3.0, "ttft_p99_s": 1.0, "tpot_p90_s": 0.02, "tpot_p99_s": 0.04},  # p99 < p90
        {"ttft_p90_s": "1", "ttft_p99_s": 2.0, "tpot_p90_s": 0.02, "tpot_p99_s": 0.04},
        {"ttft_p90_s": True, "ttft_p99_s": 2.0, "tpot_p90_s": 0.02, "tpot_p99_s": 0.04},
        {"ttft_p90_s": float("inf"), "ttft_p99_s": 2.0, "tpot_p90_s": 0.02, "tpot_p99_s": 0.04},
        {"ttft_p90_s": -1, "ttft_p99_s": 2.0, "tpot_p90_s": 0.02, "tpot_p99_s": 0.04},
        [1, 2, 3, 4],
    ],
)
def test_an_invalid_sla_keeps_the_current_targets(tmp_path: Path, sla: object) -> None:
    gw = gateway(tmp_path)
    current = gw.config.sla

    asyncio.run(gw.apply_control_config(6, {"sla": sla}))

    assert gw.config.sla == current


def test_key_prefix_is_the_control_planes_public_prefix() -> None:
    assert key_prefix("tk_ab12cd34_secret_with_underscores") == "ab12cd34"
    assert key_prefix("pdd-demo-0123") == ""


def test_tokens_once_for_all_sites_or_per_site(tmp_path: Path) -> None:
    assert parse_tokens(["T"]) == {"": "T"}
    assert parse_tokens(["dc-a=T1", "dc-b=T2"]) == {"dc-a": "T1", "dc-b": "T2"}
    with pytest.raises(ValueError, match="dc-b"):
        DataPlane(TINY, tmp_path, control_plane="http://cp", tokens={"dc-a": "T1"})
    plane = DataPlane(TINY, tmp_path, control_plane="http://cp", tokens={"": "T"})
    assert plane.site_of("wan", "wan") == "dc-a"


def test_the_control_planes_key_map_survives_a_restart_of_the_gateway(tmp_path: Path) -> None:
    # Given: the control plane replaced the file's key with its own, then went away.
    pushed = {hash_key("tk_ab12_x"): "acme"}
    asyncio.run(gateway(tmp_path).apply_control_config(4, {"tenant_keys": pushed}))
    saved = tmp_path / "gateway.keys.json"

    # When: the gateway restarts before the control plane answers again.
    restarted = gateway(tmp_path)
    restarted.restore_keys()

    # Then: the control plane's key works and the key it had replaced does not; the file holds
    # digests only and only its owner reads it.
    assert dict(restarted.config.tenants) == pushed
    assert LOCAL not in restarted.config.tenants
    assert oct(saved.stat().st_mode & 0o777) == "0o600"
    assert "tk_ab12_x" not in saved.read_text()
    # The control plane's next map replaces the saved one (and is saved in its turn).
    newer = {hash_key("tk_cd34_y"): "acme"}
    asyncio.run(restarted.apply_control_config(5, {"tenant_keys": newer}))
    assert dict(restarted.config.tenants) == newer
    again = gateway(tmp_path)
    again.restore_keys()
    assert dict(again.config.tenants) == newer


def test_a_gateway_not_joined_to_a_control_plane_keeps_its_files_keys(tmp_path: Path) -> None:
    asyncio.run(gateway(tmp_path).apply_control_config(4, {"tenant_keys": {hash_key("k"): "a"}}))

    assert dict(gateway(tmp_path).config.tenants) == {LOCAL: "local"}  # restore_keys not called


@pytest.mark.parametrize(
    "content", ['{"version": 1, "tenant_keys": {"short": "a"}}', "not json", '{"tenant_keys": []}']
)
def test_a_saved_key_map_that_is_malformed_or_readable_by_others_is_ignored(
    tmp_path: Path, content: str
) -> None:
    saved = tmp_path / "gateway.keys.json"
    saved.write_text(content)
    saved.chmod(0o600)
    gw = gateway(tmp_path)
    gw.restore_keys()
    assert dict(gw.config.tenants) == {LOCAL: "local"}

    save_keys(saved, 1, {hash_key("k"): "a"})
    saved.chmod(0o644)
    gw.restore_keys()
    assert dict(gw.config.tenants) == {LOCAL: "local"}
    assert load_keys(saved) is None
