"""Writes for API tokens: issue (the secret is returned once) and revoke."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from controlplane.accounts.models import ApiToken, Scope
from controlplane.core.broadcast import token_sockets_close
from controlplane.core.consumers import CLOSE_UNAUTHENTICATED
from pdd_core.keys import hash_key

if TYPE_CHECKING:
    from controlplane.inventory.models import Site
    from controlplane.tenancy.models import Tenant

TOKEN_PREFIX = "pdd"
# last_used_at is refreshed at most this often, so authentication is not a write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the whole bearer value; never stored, shown once


def split_token(raw: str) -> tuple[str, str] | None:
    """``pdd_<prefix>_<secret>`` -> (prefix, raw) or None when the shape is wrong."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], raw


@transaction.atomic
def api_token_issue(
    *,
    name: str,
    scope: str,
    created_by: AbstractBaseUser | None = None,
    tenant: Tenant | None = None,
    site: Site | None = None,
    expires_at: datetime | None = None,
) -> IssuedToken:
    """Create a token and return it with its secret, which is not recoverable afterwards.

    ``tenant`` binds a billing token to one tenant's data; ``site`` binds an agent token to the
    site its agents run in (required: an agent token reports for its own site only).
    """
    if scope not in Scope.values:
        raise ValueError(f"scope: must be one of {', '.join(Scope.values)}, got {scope!r}")
    if tenant is not None and scope != Scope.BILLING.value:
        raise ValueError("tenant: only billing tokens can be bound to a tenant")
    if site is not None and scope != Scope.AGENT.value:
        raise ValueError("site: only agent tokens can be bound to a site")
    if site is None and scope == Scope.AGENT.value:
        raise ValueError("site: an agent token must be bound to the site its agents run in")
    if not name.strip():
        raise ValueError("name: must not be empty")
    prefix = secrets.token_hex(4)
    while ApiToken.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    raw = f"{TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        name=name.strip(),
        scope=scope,
        prefix=prefix,
        key_hash=hash_key(raw),
        tenant=tenant,
        site=site,
        expires_at=expires_at,
        created_by=created_by if created_by is not None and created_by.pk else None,  # type: ignore[misc]
    )
    return IssuedToken(token=token, secret=raw)


@transaction.atomic
def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke a token: further requests with it are refused with 401, and the WebSockets it
    holds open are closed with 4401 once the revocation commits."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        token_id = token.pk
        transaction.on_commit(lambda: token_sockets_close(token_id, CLOSE_UNAUTHENTICATED))
    return token


def api_token_touch(*, token: ApiToken) -> None:
    """Record use, at most once per ``LAST_USED_RESOLUTION`` (a conditional UPDATE, no race)."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    ApiToken.objects.filter(pk=token.pk).exclude(
        last_used_at__gt=now - LAST_USED_RESOLUTION
    ).update(last_used_at=now)
    token.last_used_at = now
