"""``/ws/agents/<id>/``: the config channel each agent holds open.

On connect the agent receives the current config as ``{"type": "config", "version", "config"}``;
whenever a plan is activated (a push to ``config.all``) it receives the new one. It answers
``{"type": "ack", "version": n}`` once applied. Only an agent token of the agent's own site may
connect. Reconnecting agents simply receive the current version again.
"""

from __future__ import annotations

from typing import Any, ClassVar

from channels.db import database_sync_to_async

from controlplane.agents.config import CONFIG_GROUP, current_config
from controlplane.agents.models import Agent
from controlplane.agents.services import agent_ack_config, agent_touch
from controlplane.core.consumers import CLOSE_FORBIDDEN, ScopedJsonConsumer

CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _agent_site_id(agent_id: int) -> int | None:
    return Agent.objects.filter(pk=agent_id).values_list("site_id", flat=True).first()


@database_sync_to_async
def _config() -> dict[str, Any]:
    return current_config()


@database_sync_to_async
def _ack(agent_id: int, version: int) -> bool:
    return agent_ack_config(agent_id=agent_id, version=version)


@database_sync_to_async
def _touch(agent_id: int) -> None:
    agent_touch(agent_id=agent_id)


class AgentConfigConsumer(ScopedJsonConsumer):
    allowed_scopes: ClassVar[frozenset[str]] = frozenset({"agent"})

    def group_names(self) -> list[str]:
        return [CONFIG_GROUP, f"agents.{self.agent_id}"]

    async def connect(self) -> None:
        self.agent_id = int(self.scope["url_route"]["kwargs"]["agent_id"])
        token = self.scope.get("token")
        site_id = await _agent_site_id(self.agent_id)
        if token is not None and site_id is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if token is not None and token.site_id != site_id:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await super().connect()
        if getattr(self, "joined", None) is not None:
            await self._push_config()

    async def _push_config(self) -> None:
        config = await _config()
        await self.send_json({"type": "config", "version": config["version"], "config": config})

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
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            await self.send_json({"type": "error", "message": "version: a non-negative integer"})
            return
        await _ack(self.agent_id, version)
        await self.send_json({"type": "acked", "version": version})
