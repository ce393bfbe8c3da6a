"""Admin for API tokens: create (the secret is shown once), revoke, inspect last use."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from controlplane.accounts.models import ApiToken
from controlplane.accounts.services import api_token_issue, api_token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ("name", "scope", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("scope",)
    search_fields = ("name", "prefix")
    readonly_fields = ("prefix", "created_at", "created_by", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        if obj is None:
            return ("name", "scope", "tenant", "site")
        return ("name", "scope", "tenant", "site", *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        if obj is None:
            return ()
        return ("name", "scope", "tenant", "site", *self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        # The form already checked the model's constraints (an agent token needs a site).
        issued = api_token_issue(
            name=obj.name,
            scope=obj.scope,
            created_by=request.user,  # type: ignore[arg-type]
            tenant=obj.tenant,
            site=obj.site,
        )
        obj.pk = issued.token.pk
        obj.prefix = issued.token.prefix
        messages.warning(
            request, f"Token created. Copy it now, it will not be shown again: {issued.secret}"
        )

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False  # revoke instead, so the audit trail stays

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            api_token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")
