from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Who the token factory serves: tenants, the customers that accounts bind billing tokens to
    and billing charges. Below both, so neither has to import the other for a tenant."""

    name = "controlplane.tenancy"
    label = "tenancy"
