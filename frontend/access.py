"""Who may open the pages: the same scopes as the API they show.

Every page shows operator data (inventory, topology, plans, telemetry, alerts), which the API
lets operators and viewers read; so the pages admit those two scopes and refuse a billing user
with 403, as the API refuses a billing token. Writes on the pages are further limited to
operators by each view.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from controlplane.accounts.permissions import DEFAULT_READ_SCOPES
from controlplane.accounts.selectors import user_scope

View = Callable[..., HttpResponse]


def operator_page(view: View) -> View:
    """Login required, and a scope that may read the operator API (operator or viewer)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if user_scope(request.user) not in DEFAULT_READ_SCOPES:
            raise PermissionDenied("These pages are for operators and viewers.")
        return view(request, *args, **kwargs)

    return login_required(wrapper)
