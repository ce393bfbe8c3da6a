"""pdd_core's AgentLink against a real daphne: register, config, ack, heartbeat, outage.

The control plane is stopped and restarted under the agent: the agent keeps its last config,
and its first heartbeat afterwards reports since when it served without the control plane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from controlplane.accounts.services import api_token_issue
from controlplane.agents.models import Agent
from pdd_core.agent.control import AgentIdentity, AgentLink, ControlPlaneClient
from tests import factories
from tests.live_server import ServerProcess

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


async def _wait_for(predicate: Any, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def test_agent_registers_follows_config_and_rides_out_an_outage(
    server: ServerProcess,
) -> None:
    site = await sync_to_async(factories.site)(slug="dc-a")
    token = (await sync_to_async(api_token_issue)(name="a", scope="agent", site=site)).secret
    applied: list[int] = []

    async def apply(version: int, config: Mapping[str, Any]) -> None:
        # a main-decode agent's config: the plan's routing and pools, never key hashes
        assert set(config) == {"version", "routing_table", "pools"}
        applied.append(version)

    client = ControlPlaneClient(server.url, token, timeout_s=2.0)
    link = AgentLink(
        client, AgentIdentity(name="md-0", site="dc-a", role="main", engine="timed"), apply,
        stats=lambda: {"journal_pending": 0}, first_backoff_s=0.1, max_backoff_s=0.5,
    )  # fmt: skip
    task = asyncio.create_task(link.run())
    try:
        await _wait_for(lambda: _acked(link))
        agent = await sync_to_async(Agent.objects.get)(name="md-0")
        assert (agent.site_id, agent.config_version, applied) == (site.pk, 0, [0])

        await asyncio.to_thread(server.stop)
        await _wait_for(_async(lambda: link.unreachable_since is not None))
        assert link.config_version == 0  # still serving on the last config

        await asyncio.to_thread(server.start)
        await _wait_for(_async(lambda: link.outages_reported == 1), timeout_s=30)
        agent = await sync_to_async(Agent.objects.get)(name="md-0")
        assert agent.last_outage_started_at is not None
        assert agent.last_outage_ended_at is not None
        assert agent.last_outage_started_at <= agent.last_outage_ended_at
        assert agent.status == "healthy"
        assert applied == [0]  # the reconnect re-sent version 0; it was not applied twice
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _async(check: Any) -> Any:
    async def predicate() -> bool:
        return bool(check())

    return predicate


async def _acked(link: AgentLink) -> bool:
    if link.registration is None:
        return False
    version = await sync_to_async(
        lambda: (
            Agent.objects.filter(pk=link.registration.agent_id)  # type: ignore[union-attr]
            .values_list("config_version", flat=True)
            .first()
        )
    )()
    return version == 0


async def test_set_rollout_reports_the_state_and_pool_at_once(server: ServerProcess) -> None:
    # Beats every 10 minutes: only set_rollout's own heartbeat can report within the wait.
    await asyncio.to_thread(server.stop)
    server.env["PDD_AGENT_HEARTBEAT_INTERVAL_S"] = "600"
    await asyncio.to_thread(server.start)
    site = await sync_to_async(factories.site)(slug="dc-a")
    token = (await sync_to_async(api_token_issue)(name="a", scope="agent", site=site)).secret

    async def apply(version: int, config: Mapping[str, Any]) -> None:
        return None

    client = ControlPlaneClient(server.url, token, timeout_s=2.0)
    link = AgentLink(client, AgentIdentity(name="p-0", site="dc-a", role="prefill"), apply,
                     first_backoff_s=0.1, max_backoff_s=0.5)  # fmt: skip
    task = asyncio.create_task(link.run())
    try:
        await _wait_for(lambda: _acked(link))
        state = await sync_to_async(lambda: Agent.objects.get(name="p-0").state)()
        assert state == ""  # nothing reported before set_rollout

        link.set_rollout("draining", "prefill/h800/tp4xpp4")

        await _wait_for(
            lambda: _reported("p-0", ("draining", "prefill/h800/tp4xpp4")),
            timeout_s=4.0,
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _reported(name: str, expected: tuple[str, str]) -> bool:
    row = await sync_to_async(
        lambda: Agent.objects.filter(name=name).values_list("state", "pool").first()
    )()
    return row == expected
