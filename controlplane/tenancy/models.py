"""Tenancy: the customers of the token factory (Tenant).

Accounts binds a billing token to a tenant, billing charges one; both import this app, which
imports neither. The table keeps the name it had when billing owned the model (``billing_tenant``),
so moving it here changed no row or column.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models

from controlplane.inventory.models import CatalogEntry

currency_validator = RegexValidator(r"^[A-Z]{3}$", "Use a three-letter ISO 4217 code, e.g. USD.")


class Tenant(CatalogEntry):
    """A customer of the token factory; every request, key and invoice belongs to one."""

    currency = models.CharField(max_length=3, default="USD", validators=[currency_validator])
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta(CatalogEntry.Meta):
        db_table = "billing_tenant"
