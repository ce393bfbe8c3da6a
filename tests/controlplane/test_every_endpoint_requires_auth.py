"""Every URL pattern refuses anonymous callers, for every method: 401 on the API, a redirect
to the login page on pages (the API's own pages, Swagger UI and ReDoc, included)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

pytestmark = pytest.mark.django_db

# The only doors that open without credentials: the login forms, the logouts, which reveal
# nothing (logging out nobody redirects to a login page, or refuses a GET with 405), and the
# probes of process managers (``core.health``: a status and the failing check's class only).
PUBLIC = {"accounts/login/", "accounts/logout/", "admin/login/", "admin/logout/", "healthz",
          "readyz"}  # fmt: skip
# Pages under /api/ that people open in a browser: they send an anonymous visitor to the login.
API_PAGES = {"/api/docs/", "/api/redoc/"}


def _sample(pattern: Any, group: str) -> str:
    """A value that the group's own sub-pattern accepts (admin app labels are alternations)."""
    found = re.search(rf"\(\?P<{group}>(.*?)\)", pattern.regex.pattern)
    sub = found.group(1) if found else r"[^/]+"
    candidates = (*sub.split("|"), "x", "1", "json", ".json")
    if group == "format":
        return ".json"
    return next(c for c in candidates if re.fullmatch(sub, c))


def _walk(
    patterns: list[Any], namespace: str = "", groups: dict[str, str] | None = None
) -> list[str]:
    """Every named pattern, reversed with a sample value for each of its arguments."""
    urls = []
    groups = groups or {}
    for p in patterns:
        mine = {g: _sample(p.pattern, g) for g in p.pattern.regex.groupindex}
        if isinstance(p, URLResolver):
            inner = f"{namespace}{p.namespace}:" if p.namespace else namespace
            urls += _walk(p.url_patterns, inner, {**groups, **mine})
        elif isinstance(p, URLPattern) and p.name and "format" not in mine:
            # ".json" suffix variants route to the same views as their plain URLs
            urls.append(reverse(f"{namespace}{p.name}", kwargs={**groups, **mine}))
    return urls


ROUTES = sorted(set(_walk(get_resolver().url_patterns)))


def test_route_list_is_not_empty() -> None:
    assert "/api/v1/sites/" in ROUTES
    assert "/api/schema/" in ROUTES
    assert len(ROUTES) > 20


@pytest.mark.parametrize("url", ROUTES)
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_anonymous_is_refused(client: Any, url: str, method: str) -> None:
    if url.lstrip("/") in PUBLIC:
        pytest.skip("public by design: login, logout and the probes")

    response = getattr(client, method)(url)

    if (url.startswith("/api/") or url.startswith("/metrics")) and url not in API_PAGES:
        assert response.status_code == 401, (url, response.status_code)
    else:
        assert response.status_code == 302, (url, response.status_code)
        assert "login" in response["Location"]
