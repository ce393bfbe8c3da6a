"""Template context shared by every page: the user's scope and the navigation it may open."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from controlplane.accounts.selectors import user_scope
from frontend.access import home_url, sections_for


def scope(request: HttpRequest) -> dict[str, Any]:
    """The logged-in user's scope (pages show or hide controls by it), the header's sections
    for that scope with the current one marked, and the user's home page."""
    current = user_scope(getattr(request, "user", None))
    path = getattr(request, "path", "")
    sections = sections_for(current) if current else []
    active = max((s for s in sections if path.startswith(s.prefix)),
                 key=lambda s: len(s.prefix), default=None)  # fmt: skip
    return {
        "scope": current,
        "nav": [{"label": s.label, "url": s.url, "active": s is active} for s in sections],
        "home_url": home_url(current) if current else "",
    }
