"""The data-plane configuration: fixtures load, the WAN sits between sites, bad files fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_core.agent.config import ConfigError, config_from_dict, load_config
from pdd_core.agent.supervisor.plane import resolve
from pdd_core.keys import hash_key

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane"


@pytest.mark.parametrize("name", ["tiny.json", "timed.json"])
def test_the_fixtures_describe_two_sites_with_every_role(name: str) -> None:
    config = load_config(FIXTURES / name)

    roles = sorted((a.role, a.site) for a in config.agents)
    assert roles == [
        ("gateway", "dc-a"),
        ("main", "dc-b"),
        ("main", "dc-b"),
        ("prefill", "dc-a"),
        ("prefill", "dc-a"),
        ("relay", "dc-a"),
    ]


def test_resolve_routes_the_remote_site_through_the_wan_and_adds_a_demo_key(
    tmp_path: Path,
) -> None:
    config, key = resolve(load_config(FIXTURES / "tiny.json"), tmp_path)

    assert set(config.wan.routes) == {"md-0", "md-1"}
    assert config.address_of("md-0", "dc-a") == ("127.0.0.1", config.wan.routes["md-0"])
    assert config.address_of("md-0", "dc-b") == ("127.0.0.1", config.agent("md-0").port)
    assert config.address_of("p-0", "dc-a")[1] == config.agent("p-0").port != 0
    assert config.tenants[hash_key(key)] == "demo"
    assert config.journal_dir == str(tmp_path / "journal")
    again = config_from_dict(json.loads(json.dumps(config.to_dict())))
    assert again.wan.routes == config.wan.routes and again.tenants == config.tenants


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"engine": {"kind": "gpu"}}, "engine.kind"),
        ({"routing": {"singular_max_hit": 2}}, "routing"),
        ({"agents": []}, "agents"),
        ({"tenants": [{"id": "x", "key_sha256": ["short"]}]}, "tenants[0]"),
        ({"limits": {"no_such_limit": 1}}, "limits"),
        ({"wan": {"initial_window_bytes": -1}}, "wan: initial_window_bytes"),
        ({"wan": {"initial_window_bytes": "10"}}, "wan: initial_window_bytes"),
    ],
)
def test_a_bad_field_fails_loudly_naming_it(change: dict, field: str) -> None:
    raw = json.loads((FIXTURES / "tiny.json").read_text())
    raw.update(change)

    with pytest.raises(ConfigError, match=field.replace("[", r"\[")):
        config_from_dict(raw)
