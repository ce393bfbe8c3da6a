"""Scope-based authorisation shared by every API view.

A view declares which scopes may read (``read_scopes``) and which may write (``write_scopes``);
the defaults fit inventory and plans: operators read and write, viewers read, billing and agent
tokens see nothing. Billing and agent endpoints declare their own scopes.
"""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from controlplane.accounts.models import ApiToken, Scope
from controlplane.accounts.selectors import user_scope

DEFAULT_READ_SCOPES = frozenset({Scope.OPERATOR.value, Scope.VIEWER.value})
DEFAULT_WRITE_SCOPES = frozenset({Scope.OPERATOR.value})


def request_scope(request: Request) -> str | None:
    """The scope of whoever made the request: the token's, or the browser user's."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return auth.scope
    return user_scope(getattr(request, "user", None))


class ScopePermission(permissions.BasePermission):
    """Authenticated callers only; reads and writes checked against the view's scopes."""

    message = "Your token's scope does not allow this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        scope = request_scope(request)
        if scope is None:
            return False
        if request.method in permissions.SAFE_METHODS:
            allowed = getattr(view, "read_scopes", DEFAULT_READ_SCOPES)
        else:
            allowed = getattr(view, "write_scopes", DEFAULT_WRITE_SCOPES)
        return scope in allowed
