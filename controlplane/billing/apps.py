from django.apps import AppConfig


class BillingConfig(AppConfig):
    """Tenants' gateway API keys, price books, metered usage and issued invoices."""

    name = "controlplane.billing"
    label = "billing"
