"""FilterSets of the inventory API lists (query parameters such as ``?site=`` and ``?role=``)."""

from __future__ import annotations

import django_filters

from controlplane.core.filters import StrictFilterSet
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site


class SiteFilter(StrictFilterSet):
    class Meta:
        model = Site
        fields = {"slug": ["exact"], "region": ["exact"], "name": ["exact", "icontains"]}


class ChipModelFilter(StrictFilterSet):
    class Meta:
        model = ChipModel
        fields = {
            "vendor": ["exact"],
            "hbm_gib": ["gte", "lte"],
            "bf16_tflops": ["gte", "lte"],
            "price_per_hour": ["lte"],
            "is_estimate": ["exact"],
        }


class LinkFilter(StrictFilterSet):
    site = django_filters.CharFilter(method="filter_site", label="either end's site slug")
    source = django_filters.CharFilter(field_name="source__slug")
    target = django_filters.CharFilter(field_name="target__slug")

    class Meta:
        model = Link
        fields = {"kind": ["exact"]}

    def filter_site(self, queryset, name, value):  # type: ignore[no-untyped-def]
        return queryset.filter(source__slug=value) | queryset.filter(target__slug=value)


class ModelProfileFilter(StrictFilterSet):
    class Meta:
        model = ModelProfile
        fields = {"attention": ["exact"], "is_estimate": ["exact"]}


class InstancePoolFilter(StrictFilterSet):
    site = django_filters.CharFilter(field_name="site__slug")
    chip = django_filters.CharFilter(field_name="chip__slug")
    model = django_filters.CharFilter(field_name="model__slug")

    class Meta:
        model = InstancePool
        fields = {"role": ["exact"]}
