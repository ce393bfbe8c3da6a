"""DRF authentication by bearer API token (``Authorization: Bearer pdd_...``)."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from controlplane.accounts.models import ApiToken
from controlplane.accounts.selectors import api_token_for_bearer
from controlplane.accounts.services import api_token_touch


class TokenPrincipal:
    """The ``request.user`` of a token-authenticated request: a machine, not a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, token: ApiToken) -> None:
        self.token = token
        self.username = f"token:{token.name}"

    def __str__(self) -> str:
        return self.username


def parse_authorization(header: str) -> str | None:
    """The bearer value of an Authorization header (``Bearer`` or ``Token``), or None."""
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() not in {"bearer", "token"}:
        return None
    return parts[1]


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """Authenticate machines by API token; a malformed or unknown token is refused (401)."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        raw = parse_authorization(header)
        if raw is None:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header; expected 'Bearer <token>'."
            )
        token = api_token_for_bearer(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        api_token_touch(token=token)
        return TokenPrincipal(token), token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'
