"""Template context shared by every page."""

from __future__ import annotations

from django.http import HttpRequest

from controlplane.accounts.selectors import user_scope


def scope(request: HttpRequest) -> dict[str, str | None]:
    """The logged-in user's scope, so pages can show or hide controls."""
    return {"scope": user_scope(getattr(request, "user", None))}
