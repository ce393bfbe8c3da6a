"""``/ws/agents/<id>/``: the config channel each agent holds open.

On connect the agent receives the current config of its role as ``{"type": "config",
"version", "config"}``; whenever what agents run changes (a plan is activated, a key is created
or revoked: a push to ``config.all``) it receives the current one again. It answers
``{"type": "ack", "version": n}`` once applied. Only an agent token of the agent's own site may
connect, and revoking that token closes the socket (4401). Reconnecting agents simply receive
the current config again.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from django.utils import timezone

from controlplane.agents.config import current_config
from controlplane.agents.models import Agent, AgentRole
from controlplane.agents.services import agent_ack_config, agent_touch
from controlplane.billing.selectors import next_api_key_expiry
from controlplane.core.broadcast import CONFIG_GROUP
from controlplane.core.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, ScopedJsonConsumer
from controlplane.core.parsers import DB_INT_MAX


@database_sync_to_async
def _agent_site_and_role(agent_id: int) -> tuple[int, str] | None:
    return Agent.objects.filter(pk=agent_id).values_list("site_id", "role").first()


@database_sync_to_async
def _config(role: str) -> tuple[dict[str, Any], float | None]:
    """The role's config, and for gateways the seconds until its key set next changes by
    itself (a key expiring), so the channel re-sends it then."""
    config = current_config(role=role)
    if role != AgentRole.GATEWAY:
        return config, None
    expiry = next_api_key_expiry()
    return config, None if expiry is None else (expiry - timezone.now()).total_seconds()


@database_sync_to_async
def _ack(agent_id: int, version: int) -> bool:
    return agent_ack_config(agent_id=agent_id, version=version)


@database_sync_to_async
def _touch(agent_id: int) -> None:
    agent_touch(agent_id=agent_id)


class AgentConfigConsumer(ScopedJsonConsumer):
    allowed_scopes: ClassVar[frozenset[str]] = frozenset({"agent"})
    expiry_timer: asyncio.TimerHandle | None = None

    def group_names(self) -> list[str]:
        return [CONFIG_GROUP, f"agents.{self.agent_id}"]

    async def connect(self) -> None:
        self.agent_id = int(self.scope["url_route"]["kwargs"]["agent_id"])
        token = self.scope.get("token")
        found = await _agent_site_and_role(self.agent_id)
        self.role = found[1] if found is not None else ""
        if token is not None and found is None:
            await self.refuse(CLOSE_NOT_FOUND)
            return
        if token is not None and found is not None and token.site_id != found[0]:
            await self.refuse(CLOSE_FORBIDDEN)
            return
        await super().connect()
        if self.joined:
            await self._push_config()

    async def _push_config(self) -> None:
        config, change_in_s = await _config(self.role)
        await self.send_json({"type": "config", "version": config["version"], "config": config})
        if self.expiry_timer is not None:
            self.expiry_timer.cancel()
        self.expiry_timer = None
        if change_in_s is not None:
            # just after the instant, so the expired key is gone when the config is read again
            self.expiry_timer = asyncio.get_running_loop().call_later(
                max(change_in_s, 0.0) + 0.05, lambda: asyncio.ensure_future(self._push_config())
            )

    async def disconnect(self, code: int) -> None:
        if self.expiry_timer is not None:
            self.expiry_timer.cancel()
        await super().disconnect(code)

    async def broadcast_message(self, event: dict[str, Any]) -> None:
        # The event only says "something changed"; the agent gets the whole current config.
        await self._push_config()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or content.get("type") not in {"ack", "ping"}:
            await self.send_json(
                {"type": "error", "message": "Expected {'type': 'ack', 'version': N} or ping."}
            )
            return
        if content["type"] == "ping":
            await _touch(self.agent_id)
            await self.send_json({"type": "pong"})
            return
        version = content.get("version")
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not 0 <= version <= DB_INT_MAX
        ):
            message = f"version: an integer from 0 to {DB_INT_MAX} (a config version)"
            await self.send_json({"type": "error", "message": message})
            return
        await _ack(self.agent_id, version)
        await self.send_json({"type": "acked", "version": version})
