"""Writes to the inventory, each validated by the model and its pdd_core spec, in a transaction.

Seeding from the catalog goes through ``pdd_core.specs``' loaders, so the database holds the same
figures the simulator and planner read from ``fixtures/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Model

from controlplane.core.services import model_create, model_update
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site
from pdd_core import specs


def _spec_columns(spec: Any, model: type[Model]) -> dict[str, Any]:
    """Every field of a ``pdd_core`` spec that is also a column of ``model`` (its ``id`` is
    the slug, set by the caller), so a field added to both is seeded without a list to keep."""
    columns = {f.name for f in model._meta.concrete_fields} - {"id"}
    return {f.name: getattr(spec, f.name) for f in fields(spec) if f.name in columns}


def _chip_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    spec = specs.chip_from_dict(raw)  # validates
    return {
        **_spec_columns(spec, ChipModel),
        "price_per_hour": Decimal(str(spec.price_per_hour)),
        "notes": str(raw.get("notes", "")),
        "is_estimate": bool(raw.get("estimate", False)),
    }


def _model_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    spec = specs.model_from_dict(raw)  # validates
    return {
        **_spec_columns(spec, ModelProfile),
        "attention": spec.attention.value,
        "notes": str(raw.get("notes", "")),
        "is_estimate": spec.estimate,
    }


@transaction.atomic
def catalog_seed(
    *,
    chip_entries: list[dict[str, Any]] | None = None,
    model_entries: list[dict[str, Any]] | None = None,
) -> tuple[int, int]:
    """Upsert the chip and model catalogs (by catalog id). Returns (chips, models) written."""
    chip_entries = specs.load_chip_entries() if chip_entries is None else chip_entries
    model_entries = specs.load_model_entries() if model_entries is None else model_entries
    for raw in chip_entries:
        chip, _ = ChipModel.objects.get_or_create(slug=raw["id"], defaults=_chip_fields(raw))
        model_update(chip, _chip_fields(raw))
    for raw in model_entries:
        profile, _ = ModelProfile.objects.get_or_create(slug=raw["id"], defaults=_model_fields(raw))
        model_update(profile, _model_fields(raw))
    return len(chip_entries), len(model_entries)


@transaction.atomic
def topology_seed(*, raw: Mapping[str, Any]) -> tuple[int, int, int]:
    """Upsert sites, links and pools of a topology file (validated by pdd_core first)."""
    specs.topology_from_dict(raw)  # the whole file is valid before anything is written
    sites = {}
    for s in raw["sites"]:
        site, _ = Site.objects.get_or_create(
            slug=s["id"], defaults={"name": s.get("name") or s["id"]}
        )
        sites[s["id"]] = model_update(
            site,
            {
                "name": s.get("name") or s["id"],
                "region": s.get("region", ""),
                "description": s.get("description", ""),
            },
        )
    for x in raw.get("links", ()):
        data = {
            "kind": x["kind"],
            "source": sites[x["source_site"]],
            "target": sites[x["target_site"]],
            "bandwidth_gbps": x["bandwidth_gbps"],
            "rtt_ms": x["rtt_ms"],
            "jitter_ms": x.get("jitter_ms", 0.0),
            "bandwidth_jitter": x.get("bandwidth_jitter", 0.0),
            "cost_per_gb": Decimal(str(x["cost_per_gb"])) if x.get("cost_per_gb") else None,
        }
        link = Link.objects.filter(slug=x["id"]).first()
        if link is None:
            model_create(Link, {"slug": x["id"], **data})
        else:
            model_update(link, data)
    for p in raw.get("pools", ()):
        data = {
            "site": sites[p["site"]],
            "chip": ChipModel.objects.get(slug=p["chip"]),
            "model": ModelProfile.objects.get(slug=p["model"]),
            "role": p["role"],
            "chips_per_instance": p.get("tp", 1),
            "pp": p.get("pp", 1),
            "dp": p.get("dp", 1),
            "ep": p.get("ep", 1),
            "instance_count": p["instances"],
        }
        slug = p.get("name") or f"{p['site']}-{p['role'].lower()}-{p['chip']}"
        pool = InstancePool.objects.filter(slug=slug).first()
        if pool is None:
            model_create(InstancePool, {"slug": slug, **data})
        else:
            model_update(pool, data)
    return len(sites), len(raw.get("links", ())), len(raw.get("pools", ()))
