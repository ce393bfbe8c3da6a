"""API tokens for machines (billing systems, agents, automation) and the scopes they carry."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class Scope(models.TextChoices):
    """What a caller may do. Browser users map onto the same scopes (see ``selectors``)."""

    OPERATOR = "operator", "Operator (read/write inventory and plans)"
    VIEWER = "viewer", "Viewer (read-only)"
    BILLING = "billing", "Billing (billing endpoints only, read-only)"
    AGENT = "agent", "Agent (agent endpoints only)"


class ApiToken(models.Model):
    """A bearer token for a machine client, stored as a SHA-256 hash and shown once.

    The token reads ``pdd_<prefix>_<secret>``; the prefix is stored in clear so a token can be
    found and recognised in logs without ever storing the secret. Tokens are revoked, not deleted,
    so the audit trail of who had access stays.
    """

    name = models.CharField(max_length=100, unique=True)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Optional end of validity: refused from this instant, and its open sockets closed then.
    expires_at = models.DateTimeField(null=True, blank=True)
    # A billing token bound to a tenant sees only that tenant's billing data. PROTECT: deleting
    # the tenant must not silently turn the token into one that sees every tenant.
    tenant = models.ForeignKey(
        "tenancy.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # An agent token is bound to the site its agents run in (always, see the constraints): an
    # agent cannot register (or be configured, or report) as another site's. PROTECT for the
    # same reason as the tenant.
    site = models.ForeignKey(
        "inventory.Site", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope__in=[s.value for s in Scope]), name="apitoken_scope_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(tenant__isnull=True) | models.Q(scope=Scope.BILLING.value),
                name="apitoken_tenant_only_for_billing",
            ),
            models.CheckConstraint(
                condition=models.Q(site__isnull=True) | models.Q(scope=Scope.AGENT.value),
                name="apitoken_site_only_for_agent",
            ),
            # An active agent token is always bound to a site (agents report for it only).
            models.CheckConstraint(
                condition=~models.Q(scope=Scope.AGENT.value)
                | models.Q(site__isnull=False)
                | models.Q(revoked_at__isnull=False),
                name="apitoken_agent_has_site",
                violation_error_message="An agent token must be bound to a site.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, pdd_{self.prefix}_...)"

    def clean(self) -> None:
        # The constraint below says the same, but forms skip constraints on fields they lack.
        if self.scope == Scope.AGENT and self.site_id is None and self.revoked_at is None:
            raise ValidationError({"site": "An agent token must be bound to a site."})

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and (
            self.expires_at is None or self.expires_at > timezone.now()
        )
