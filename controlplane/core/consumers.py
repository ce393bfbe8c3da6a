"""Base WebSocket consumer: authenticated callers of allowed scopes only, JSON in and out."""

from __future__ import annotations

from typing import Any, ClassVar

from channels.generic.websocket import AsyncJsonWebsocketConsumer

# Close codes in the 4000 range mirror HTTP: 4401 unauthenticated, 4403 forbidden.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class ScopedJsonConsumer(AsyncJsonWebsocketConsumer):
    """Accepts the handshake only for the scopes in ``allowed_scopes``; joins ``groups()``."""

    allowed_scopes: ClassVar[frozenset[str]] = frozenset({"operator", "viewer"})

    def group_names(self) -> list[str]:
        return []

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not getattr(user, "is_authenticated", False):
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if self.scope.get("pdd_scope") not in self.allowed_scopes:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.joined = self.group_names()
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def broadcast_message(self, event: dict[str, Any]) -> None:
        await self.send_json(event["payload"])
