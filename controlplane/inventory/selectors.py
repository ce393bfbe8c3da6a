"""Reads of the inventory with the joins their representations need (bounded query counts)."""

from __future__ import annotations

from django.db.models import QuerySet

from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site
from pdd_core import specs


def site_list() -> QuerySet[Site]:
    return Site.objects.all()


def chip_model_list() -> QuerySet[ChipModel]:
    return ChipModel.objects.all()


def link_list() -> QuerySet[Link]:
    return Link.objects.select_related("source", "target")


def model_profile_list() -> QuerySet[ModelProfile]:
    return ModelProfile.objects.all()


def instance_pool_list() -> QuerySet[InstancePool]:
    return InstancePool.objects.select_related("site", "chip", "model")


def topology_snapshot() -> specs.Topology:
    """The whole inventory as a pdd_core Topology, for the planner and simulator (4 queries)."""
    chips = {c.slug: c.to_spec() for c in chip_model_list()}
    models = {m.slug: m.to_spec() for m in model_profile_list()}
    return specs.Topology(
        sites=tuple(s.to_spec() for s in site_list()),
        links=tuple(x.to_spec() for x in link_list()),
        pools=tuple(p.to_spec() for p in instance_pool_list()),
        chips=chips,
        models=models,
    )


def model_specs(slugs: set[str]) -> dict[str, specs.ModelSpec]:
    """The ``pdd_core`` specs of the named model profiles that exist (one query).

    Telemetry bounds each reported record by its model's context window and KV bytes per
    token through this selector, so it never reads ``ModelProfile`` itself.
    """
    return {m.slug: m.to_spec() for m in ModelProfile.objects.filter(slug__in=slugs)}
