from django.apps import AppConfig


class BillingConfig(AppConfig):
    """Tenants, their gateway API keys, price books, metered usage and issued invoices."""

    name = "controlplane.billing"
    label = "billing"
