from django.apps import AppConfig


class InventoryConfig(AppConfig):
    """Where the compute is: sites, chips, links, models and instance pools."""

    name = "controlplane.inventory"
    label = "inventory"
