"""Reads for authentication: find a live token by its bearer value; a caller's scope."""

from __future__ import annotations

import hmac
from typing import Any

from controlplane.accounts.models import ApiToken, Scope
from controlplane.accounts.services import split_token
from pdd_core.keys import hash_key

# Browser users get their scope from a group of the same name; superusers are operators.
_GROUP_SCOPES = (Scope.OPERATOR, Scope.BILLING, Scope.VIEWER)


def api_token_for_bearer(raw: str) -> ApiToken | None:
    """The active (not revoked, not expired) token whose secret is ``raw``, compared in
    constant time, or None."""
    parsed = split_token(raw)
    if parsed is None:
        return None
    prefix, whole = parsed
    token = ApiToken.objects.filter(prefix=prefix, revoked_at__isnull=True).first()
    if token is None or not hmac.compare_digest(token.key_hash, hash_key(whole)):
        return None
    return token if token.is_active else None  # expired


def user_scope(user: Any) -> str | None:
    """The scope of a logged-in browser user: superuser -> operator, else by group name (a
    token-authenticated principal has its token's scope)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    token = getattr(user, "token", None)
    if isinstance(token, ApiToken):
        return token.scope
    if getattr(user, "is_superuser", False):
        return Scope.OPERATOR.value
    names = set(user.groups.values_list("name", flat=True))
    for scope in _GROUP_SCOPES:
        if scope.value in names:
            return scope.value
    return Scope.VIEWER.value if user.is_active else None
