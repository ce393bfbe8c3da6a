"""Inventory REST endpoints: thin viewsets over selectors, serializers and shared services."""

from __future__ import annotations

from controlplane.core.api import ServiceModelViewSet
from controlplane.inventory import filters, selectors
from controlplane.inventory.api import serializers
from controlplane.inventory.consumers import INVENTORY_GROUP


class InventoryViewSet(ServiceModelViewSet):
    """Inventory writes are announced on ``/ws/inventory/``."""

    change_group = INVENTORY_GROUP


class SiteViewSet(InventoryViewSet):
    """Datacenters. Deleting a site still used by a pool or link is refused (409)."""

    queryset = selectors.site_list()
    serializer_class = serializers.SiteSerializer
    filterset_class = filters.SiteFilter
    search_fields = ["slug", "name", "region"]
    ordering_fields = ["slug", "name", "region"]


class ChipModelViewSet(InventoryViewSet):
    """Accelerator types with their four axes, efficiencies, price and source."""

    queryset = selectors.chip_model_list()
    serializer_class = serializers.ChipModelSerializer
    filterset_class = filters.ChipModelFilter
    search_fields = ["slug", "name", "vendor"]
    ordering_fields = ["slug", "bf16_tflops", "hbm_gib", "hbm_tbps", "price_per_hour"]


class LinkViewSet(InventoryViewSet):
    """RDMA fabrics inside sites and WAN lines between them."""

    queryset = selectors.link_list()
    serializer_class = serializers.LinkSerializer
    filterset_class = filters.LinkFilter
    ordering_fields = ["slug", "bandwidth_gbps", "rtt_ms"]


class ModelProfileViewSet(InventoryViewSet):
    """Served models; ``kv_bytes_per_token`` is derived from the config."""

    queryset = selectors.model_profile_list()
    serializer_class = serializers.ModelProfileSerializer
    filterset_class = filters.ModelProfileFilter
    search_fields = ["slug", "name"]
    ordering_fields = ["slug", "total_params_b", "active_params_b"]


class InstancePoolViewSet(InventoryViewSet):
    """Pools of P, RLD or MD instances of a model on a chip type in a site."""

    queryset = selectors.instance_pool_list()
    serializer_class = serializers.InstancePoolSerializer
    filterset_class = filters.InstancePoolFilter
    ordering_fields = ["slug", "instance_count"]
