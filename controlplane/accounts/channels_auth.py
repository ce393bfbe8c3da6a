"""WebSocket authentication: API token or browser session, with an Origin check.

Browsers always send ``Origin``; it must name an allowed host, which stops another site from
riding a logged-in user's cookie. Machine clients (agents) send no Origin and must present a
token, in the ``Authorization: Bearer`` header or as ``?token=``. Consumers read
``scope["user"]`` and ``scope["pdd_scope"]`` and refuse what they do not allow.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings

from controlplane.accounts.authentication import TokenPrincipal, parse_authorization
from controlplane.accounts.selectors import api_token_for_bearer, user_scope
from controlplane.accounts.services import api_token_touch


def _bearer(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return parse_authorization(value.decode("latin1"))
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    values = query.get("token")
    return values[-1] if values else None


@database_sync_to_async
def _resolve(raw: str | None, user: Any) -> tuple[Any, Any, str | None]:
    if raw:
        token = api_token_for_bearer(raw)
        if token is None:
            return None, None, None
        api_token_touch(token=token)
        return TokenPrincipal(token), token, token.scope
    return user, None, user_scope(user)


class TokenAuthMiddleware(BaseMiddleware):
    """Sets ``scope["user"]``, ``scope["token"]`` and ``scope["pdd_scope"]`` (None if refused)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        raw = _bearer(scope)
        user, token, pdd_scope = await _resolve(raw, scope.get("user"))
        scope = dict(scope, user=user, token=token, pdd_scope=pdd_scope)
        return await super().__call__(scope, receive, send)


class BrowserOriginValidator(OriginValidator):
    """Accept a missing Origin (machine clients, who must use a token); check any present one."""

    def valid_origin(self, parsed_origin: Any) -> bool:
        if parsed_origin is None:
            return True
        return bool(self.validate_origin(parsed_origin))


def websocket_auth_stack(inner: Any) -> Any:
    """Origin check, then session, then token: the stack every WebSocket route sits behind."""
    hosts = list(settings.ALLOWED_HOSTS) or ["localhost"]
    return BrowserOriginValidator(AuthMiddlewareStack(TokenAuthMiddleware(inner)), hosts)
