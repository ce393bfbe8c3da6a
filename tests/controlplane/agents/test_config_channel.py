"""``/ws/agents/<id>/``: agents of their own site receive their role's config, every change
(a plan, a key created or revoked) at once, and ack; a revoked token's socket is closed."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane.accounts.models import ApiToken
from controlplane.accounts.services import api_token_issue, api_token_revoke
from controlplane.agents.models import Agent
from controlplane.billing.services import api_key_create, api_key_revoke
from controlplane.core.broadcast import CONFIG_GROUP, broadcast
from controlplane.telemetry.models import SlaRule
from controlplane.telemetry.selectors import gateway_sla, sla_lines
from pdd_core.keys import hash_key
from pdd_core.specs import SLA
from tests import factories
from tests.controlplane.ws import communicator, refusal_code

pytestmark = pytest.mark.django_db(transaction=True)


def _setup(role: str = "main") -> tuple[int, str, str]:
    a, b = factories.site(slug="dc-a"), factories.site(slug="dc-b")
    agent = Agent.objects.create(name="agent-0", site=a, role=role)
    own = api_token_issue(name="a", scope="agent", site=a).secret
    other = api_token_issue(name="b", scope="agent", site=b).secret
    return agent.pk, own, other


async def _connect(path: str, token: str | None) -> tuple[WebsocketCommunicator, bool, Any]:
    ws = communicator(path, token)
    connected, code = await ws.connect(timeout=5)
    return ws, connected, code


async def test_agent_receives_config_on_connect_and_acks() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()

    ws, connected, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    first = await ws.receive_json_from(timeout=5)
    await ws.send_json_to({"type": "ack", "version": first["version"]})
    acked = await ws.receive_json_from(timeout=5)

    assert connected
    assert first["type"] == "config"
    assert set(first["config"]) == {"version", "routing_table", "pools"}
    assert acked == {"type": "acked", "version": first["version"]}
    agent = await sync_to_async(Agent.objects.get)(pk=agent_id)
    assert agent.config_version == first["version"]
    await ws.disconnect()


async def test_a_push_to_config_all_reaches_connected_agents() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    await ws.receive_json_from(timeout=5)

    await sync_to_async(broadcast)(CONFIG_GROUP, {"event": "activated"}, force=True)
    pushed = await ws.receive_json_from(timeout=5)

    assert pushed["type"] == "config"
    await ws.disconnect()


async def test_other_sites_token_is_refused_with_4403() -> None:
    agent_id, _, other = await sync_to_async(_setup)()

    code = await refusal_code(f"/ws/agents/{agent_id}/", other)

    assert code == 4403


async def test_unknown_agent_and_non_agent_scopes_are_refused(issue_token: Any) -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    viewer = await sync_to_async(issue_token)("viewer")

    unknown = await refusal_code("/ws/agents/999999/", own)
    as_viewer = await refusal_code(f"/ws/agents/{agent_id}/", viewer)
    anonymous = await refusal_code(f"/ws/agents/{agent_id}/", None)

    assert (unknown, as_viewer, anonymous) == (4404, 4403, 4401)


async def test_a_gateway_gets_key_hashes_when_a_key_is_created_and_revoked() -> None:
    agent_id, own, _ = await sync_to_async(_setup)("gateway")
    tenant = await sync_to_async(factories.tenant)(slug="acme")
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    first = await ws.receive_json_from(timeout=5)

    issued = await sync_to_async(api_key_create)(tenant=tenant, name="k")
    after_create = await ws.receive_json_from(timeout=2)
    await sync_to_async(api_key_revoke)(api_key=issued.api_key)
    after_revoke = await ws.receive_json_from(timeout=2)

    assert first["config"]["tenant_keys"] == {}
    assert after_create["config"]["tenant_keys"] == {hash_key(issued.secret): "acme"}
    assert after_revoke["config"]["tenant_keys"] == {}
    assert after_create["version"] == first["version"]
    await ws.disconnect()


async def test_an_expiring_key_leaves_the_gateways_config_when_it_expires() -> None:
    from datetime import timedelta

    from django.utils import timezone

    agent_id, own, _ = await sync_to_async(_setup)("gateway")
    tenant = await sync_to_async(factories.tenant)(slug="acme")
    expires = timezone.now() + timedelta(seconds=1.5)
    issued = await sync_to_async(api_key_create)(tenant=tenant, name="k", expires_at=expires)
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)

    first = await ws.receive_json_from(timeout=5)
    after_expiry = await ws.receive_json_from(timeout=3.5)  # within 2 s of the expiry

    assert first["config"]["tenant_keys"] == {hash_key(issued.secret): "acme"}
    assert after_expiry["config"]["tenant_keys"] == {}
    assert timezone.now() >= expires
    await ws.disconnect()


async def test_a_gateway_gets_the_sla_targets_the_charts_use_and_each_rule_written(
    operator: Any,
) -> None:
    agent_id, own, _ = await sync_to_async(_setup)("gateway")
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    first = await ws.receive_json_from(timeout=5)
    rule = {"slug": "ttft", "name": "TTFT", "metric": "ttft_p90", "threshold": 1.2, "window_s": 60}

    created = await sync_to_async(operator.post)(
        "/api/v1/telemetry/sla-rules/", rule, format="json"
    )
    after_create = await ws.receive_json_from(timeout=2)
    lines = await sync_to_async(sla_lines)()
    removed = await sync_to_async(operator.delete)("/api/v1/telemetry/sla-rules/ttft/")
    after_delete = await ws.receive_json_from(timeout=2)

    default = SLA()
    assert first["config"]["sla"] == asdict(default)
    assert created.status_code == 201 and removed.status_code == 204
    assert after_create["config"]["sla"] == {**asdict(default), "ttft_p90_s": 1.2}
    assert lines["ttft_p90"] == after_create["config"]["sla"]["ttft_p90_s"]  # one source
    assert after_delete["config"]["sla"] == asdict(default)
    await ws.disconnect()


async def test_a_rule_above_its_p99_target_raises_the_pushed_p99_to_it() -> None:
    await sync_to_async(SlaRule.objects.create)(
        slug="slow", name="slow", metric="tpot_p90", threshold=0.3, window_s=60
    )

    pushed = await sync_to_async(gateway_sla)()

    assert pushed["tpot_p90_s"] == pushed["tpot_p99_s"] == 0.3
    SLA(**pushed)  # a valid SLA, which the gateway accepts


async def test_a_non_gateway_agent_never_gets_key_hashes() -> None:
    agent_id, own, _ = await sync_to_async(_setup)("prefill")
    tenant = await sync_to_async(factories.tenant)(slug="acme")
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    first = await ws.receive_json_from(timeout=5)

    await sync_to_async(api_key_create)(tenant=tenant, name="k")
    pushed = await ws.receive_json_from(timeout=2)

    assert "tenant_keys" not in first["config"]
    assert "tenant_keys" not in pushed["config"]
    assert "sla" not in first["config"]
    await ws.disconnect()


async def test_revoking_the_token_closes_its_open_socket_with_4401() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    await ws.receive_json_from(timeout=5)
    token = await sync_to_async(ApiToken.objects.get)(name="a")

    await sync_to_async(api_token_revoke)(token=token)
    closed = await ws.receive_output(timeout=2)

    assert closed == {"type": "websocket.close", "code": 4401}
    assert await refusal_code(f"/ws/agents/{agent_id}/", own) == 4401


async def test_malformed_ack_is_answered_not_applied() -> None:
    agent_id, own, _ = await sync_to_async(_setup)()
    ws, _, _ = await _connect(f"/ws/agents/{agent_id}/", own)
    await ws.receive_json_from(timeout=5)

    await ws.send_json_to({"type": "ack", "version": "seven"})
    answer = await ws.receive_json_from(timeout=5)

    assert answer["type"] == "error"
    agent = await sync_to_async(Agent.objects.get)(pk=agent_id)
    assert agent.config_version is None
    await ws.disconnect()


async def test_an_expiring_token_is_refused_and_its_socket_closed_when_it_expires() -> None:
    from datetime import timedelta

    from django.utils import timezone

    agent_id, _, _ = await sync_to_async(_setup)()
    site = await sync_to_async(lambda: Agent.objects.get(pk=agent_id).site)()
    expires = timezone.now() + timedelta(seconds=1.5)
    secret = await sync_to_async(
        lambda: api_token_issue(name="short", scope="agent", site=site, expires_at=expires).secret
    )()
    ws, connected, _ = await _connect(f"/ws/agents/{agent_id}/", secret)
    await ws.receive_json_from(timeout=5)

    closed = await ws.receive_output(timeout=3.5)

    assert connected
    assert closed == {"type": "websocket.close", "code": 4401}
    assert timezone.now() >= expires
    assert await refusal_code(f"/ws/agents/{agent_id}/", secret) == 4401
