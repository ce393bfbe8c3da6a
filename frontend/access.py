"""Who may open the pages: the same scopes as the API they show, and the navigation that follows.

The operator pages (overview, topology, alerts, inventory, catalogue, plans) show what the API
lets operators and viewers read; the billing pages show what the billing API lets operators and
billing users read. A page refuses the other scopes with 403, as the API refuses their tokens;
writes are further limited to operators by each view. ``NAVIGATION`` lists each section with the
scopes that may open it, so the header shows a user only what they may open, and a user's home
is the first section they may open (a billing user lands on billing, not on a 403).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from controlplane.accounts.models import Scope
from controlplane.accounts.selectors import user_scope

View = Callable[..., HttpResponse]

OPERATOR_PAGES = frozenset({Scope.OPERATOR.value, Scope.VIEWER.value})
BILLING_PAGES = frozenset({Scope.OPERATOR.value, Scope.BILLING.value})
EVERY_PAGE_SCOPE = OPERATOR_PAGES | BILLING_PAGES


@dataclass(frozen=True)
class Section:
    """One entry of the header: its label, URL name (and arguments), who may open it, and the
    URL prefix that marks it as the current section."""

    label: str
    url_name: str
    scopes: frozenset[str]
    prefix: str
    args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return reverse(self.url_name, args=self.args)


NAVIGATION = (
    Section("Overview", "home", OPERATOR_PAGES, "/"),
    Section("Topology", "topology", OPERATOR_PAGES, "/topology/"),
    Section("Alerts", "alerts", OPERATOR_PAGES, "/alerts/"),
    Section("Plans", "plan-list", OPERATOR_PAGES, "/plans/"),
    Section("Inventory", "inventory-list", OPERATOR_PAGES, "/inventory/", ("sites",)),
    Section("Catalogue", "catalogue", OPERATOR_PAGES, "/catalogue/"),
    Section("Billing", "billing-home", BILLING_PAGES, "/billing/"),
    Section("API", "api-docs", EVERY_PAGE_SCOPE, "/api/"),
)


def sections_for(scope: str | None) -> list[Section]:
    """The sections a scope may open, in header order."""
    return [s for s in NAVIGATION if scope in s.scopes]


def home_url(scope: str | None) -> str:
    """Where a user of ``scope`` starts: the first page they may open (the login if none)."""
    pages = [s for s in sections_for(scope) if s.url_name != "api-docs"]
    return pages[0].url if pages else reverse("login")


def scoped_page(scopes: frozenset[str], refusal: str) -> Callable[[View], View]:
    """Login required, and one of ``scopes``; others get 403 with ``refusal``."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if user_scope(request.user) not in scopes:
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        return login_required(wrapper)

    return decorate


operator_page = scoped_page(OPERATOR_PAGES, "These pages are for operators and viewers.")
billing_page = scoped_page(BILLING_PAGES, "Billing pages are for billing users and operators.")
