"""The plane's processes follow its membership in the configuration file (``agent.membership``):
the gateway links to agents a reconciler started, stops routing to draining ones and says what
each still holds; a malformed file changes nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from pdd_core.agent.config import AgentSpec, DataPlaneConfig, load_config
from pdd_core.agent.gateway.attempt import Attempt
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.gateway.types import UpstreamError
from pdd_core.agent.membership import follow_members, same_members, with_members
from pdd_core.agent.runtime import PeerLink
from pdd_core.agent.supervisor.plane import resolve

TINY = Path(__file__).resolve().parents[3] / "fixtures" / "dataplane" / "tiny.json"


def plane(tmp_path: Path) -> tuple[DataPlaneConfig, Path]:
    config, _ = resolve(load_config(TINY), tmp_path)
    path = tmp_path / "dataplane.json"
    path.write_text(json.dumps(config.to_dict()))
    return load_config(path), path


def joined(config: DataPlaneConfig, *agents: AgentSpec, **routes: int) -> DataPlaneConfig:
    wan = replace(config.wan, routes={**config.wan.routes, **routes})
    return replace(config, agents=(*config.agents, *agents), wan=wan)


def with_state(config: DataPlaneConfig, agent_id: str, state: str) -> DataPlaneConfig:
    agents = tuple(replace(a, state=state) if a.id == agent_id else a for a in config.agents)
    return replace(config, agents=agents)


async def test_a_changed_file_hands_its_membership_over_and_a_malformed_one_does_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config, path = plane(tmp_path)
    seen: list[DataPlaneConfig] = []

    async def apply(fresh: DataPlaneConfig) -> None:
        seen.append(fresh)

    follow = asyncio.create_task(follow_members(path, lambda: config, apply, every_s=0.01))
    try:
        await asyncio.sleep(0.05)  # the follower has read the file's first signature
        path.write_text("{not json")
        await asyncio.sleep(0.1)
        grown = joined(config, AgentSpec("md-2", "main", "dc-b", port=9), **{"md-2": 10})
        path.write_text(json.dumps(grown.to_dict()))
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
    finally:
        follow.cancel()

    assert "membership not updated" in caplog.text
    assert [a.id for a in seen[0].agents][-1] == "md-2"
    assert seen[0].wan.routes["md-2"] == 10
    assert same_members(with_members(config, seen[0]), seen[0])
    assert with_members(config, seen[0]).routing == config.routing


async def test_the_gateway_links_to_a_new_agent_and_stops_routing_to_a_draining_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _ = plane(tmp_path)
    gateway = Gateway(config, "gateway")
    monkeypatch.setattr(PeerLink, "up", property(lambda link: True))  # every link connected

    await gateway.update_members(
        joined(config, AgentSpec("p-2", "prefill", "dc-a", port=9, pool="prefill/h800/tp4"),
               AgentSpec("md-2", "main", "dc-b", port=11, state="starting"), **{"md-2": 12})
    )  # fmt: skip

    assert gateway.up("prefill") == ["p-0", "p-1", "p-2"]
    assert "md-2" not in gateway.up("main")  # starting: not routed before it is serving
    assert gateway.router.admission.capacity["md-2"] == config.limits.decode_batch
    assert "md-2" in gateway.probe.links  # across the WAN: probed like the others
    await gateway.update_members(with_state(gateway.config, "p-0", "draining"))
    assert gateway.up("prefill") == ["p-1", "p-2"]
    route = gateway.router.route(list(range(64)), 4, {})
    assert route.prefill != "p-0"
    await gateway.update_members(with_state(gateway.config, "md-2", "stopped"))
    assert "md-2" not in gateway.probe.links
    await gateway.close()


@pytest.fixture
async def connected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    """The tiny plane's gateway with every link connected."""
    gateway = Gateway(plane(tmp_path)[0], "gateway")
    monkeypatch.setattr(PeerLink, "up", property(lambda link: True))
    yield gateway
    await gateway.close()


async def test_an_agent_holds_an_attempt_until_losing_it_would_no_longer_doom_it(
    connected: Gateway,
) -> None:
    gateway = connected
    route = gateway.router.route(list(range(600)), 2, {})  # long prompt, short answer: P-RLD
    attempt = Attempt("r1", route)
    gateway.attempts["r1"] = attempt

    before = gateway.holding(route.prefill), gateway.holding(str(route.relay))
    attempt.prefilled = True  # P shipped the KV: losing P no longer loses the request
    after = gateway.holding(route.prefill), gateway.holding(str(route.relay))

    assert (before, after) == ((1, 1), (0, 1))


async def test_a_resumed_request_may_finish_on_a_draining_agent_a_new_one_may_not(
    connected: Gateway,
) -> None:
    gateway = connected
    for agent in ("p-0", "p-1"):
        await gateway.update_members(with_state(gateway.config, agent, "draining"))

    with pytest.raises(UpstreamError, match="p-0: draining"):
        gateway.router.route(list(range(64)), 4, {})
    resumed = gateway.router.route(list(range(64)), 4, {}, resuming=True)

    assert resumed.prefill in ("p-0", "p-1")
