"""Base WebSocket consumer: authenticated callers of allowed scopes only, JSON in and out.

A refused handshake is accepted and then closed with a close code in the 4000 range that
mirrors HTTP, so that clients can tell why (a handshake refused before ``accept`` reaches the
client as a bare HTTP 403 without a code). A frame no stream can read is refused the same way,
never by the server failing (1011); RFC 6455 has codes for it (1003, 1007) but daphne's
WebSocket library sends only 1000 and 3000-4999, so these mirror HTTP too:

========  ==========================================================================
code      meaning
========  ==========================================================================
4400      a text frame that is not JSON, or JSON nested deeper than ``MAX_JSON_DEPTH``
4401      unauthenticated: no session or token, an unknown token, or a token revoked
          (or expired) while the socket was open
4403      forbidden: the token's scope (or site) does not allow this stream
4404      not found: the agent named in the URL does not exist
4415      a binary frame: every stream speaks JSON text
4503      the server is shutting down: reconnect (``core.shutdown``)
========  ==========================================================================
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils import timezone

from controlplane.core import shutdown
from controlplane.core.broadcast import token_group
from controlplane.core.parsers import MAX_JSON_DEPTH, json_depth

CLOSE_INVALID_PAYLOAD = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_UNSUPPORTED_DATA = 4415


class ScopedJsonConsumer(AsyncJsonWebsocketConsumer):
    """Accepts the handshake only for the scopes in ``allowed_scopes``; joins ``groups()``.

    A socket opened with an API token also joins that token's group, so that revoking the
    token closes it (``core.broadcast.token_sockets_close``).
    """

    allowed_scopes: ClassVar[frozenset[str]] = frozenset({"operator", "viewer"})
    joined: list[str]
    admitted: bool = False  # the handshake was accepted for a caller of an allowed scope
    token_expiry: asyncio.TimerHandle | None = None

    def group_names(self) -> list[str]:
        return []

    async def refuse(self, code: int) -> None:
        """Accept, then close with ``code`` (see the table above)."""
        self.joined = []
        await self.accept()
        await self.close(code=code)

    async def connect(self) -> None:
        if shutdown.closing():  # this process is going away: reconnect to another
            await self.refuse(shutdown.CLOSE_RESTART)
            return
        user = self.scope.get("user")
        if user is None or not getattr(user, "is_authenticated", False):
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        if self.scope.get("pdd_scope") not in self.allowed_scopes:
            await self.refuse(CLOSE_FORBIDDEN)
            return
        self.joined = self.group_names()
        token = self.scope.get("token")
        if token is not None:
            self.joined.append(token_group(token.pk))
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        shutdown.track(self)
        self.admitted = True
        expires_at = getattr(token, "expires_at", None)
        if expires_at is not None:
            self.token_expiry = asyncio.get_running_loop().call_later(
                max((expires_at - timezone.now()).total_seconds(), 0.0),
                lambda: asyncio.ensure_future(self.close(code=CLOSE_UNAUTHENTICATED)),
            )

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Decode a JSON text frame for ``receive_json``; refuse (close) any other frame."""
        if text_data is None:
            await self.close(code=CLOSE_UNSUPPORTED_DATA)
            return
        try:
            content = await self.decode_json(text_data)
        except (ValueError, RecursionError):  # the decoder recurses per nesting level
            await self.close(code=CLOSE_INVALID_PAYLOAD)
            return
        if json_depth(content) > MAX_JSON_DEPTH:
            await self.close(code=CLOSE_INVALID_PAYLOAD)
            return
        await self.receive_json(content, **kwargs)

    async def disconnect(self, code: int) -> None:
        shutdown.untrack(self)
        if self.token_expiry is not None:
            self.token_expiry.cancel()
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def broadcast_message(self, event: dict[str, Any]) -> None:
        await self.send_json(event["payload"])

    async def socket_close(self, event: dict[str, Any]) -> None:
        await self.close(code=int(event["code"]))
