"""Catalog loaders: the chip and model catalogs of ``fixtures/catalog/`` and topology files.

Both halves of the product read these same files: ``pdd_core`` through the functions below, the
control plane by seeding its database from ``load_*_entries`` (``manage.py seed_demo``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from pdd_core.specs.core import ChipSpec, ModelSpec, SpecError
from pdd_core.specs.deployment import LinkSpec, PoolSpec, SiteSpec, Topology

CATALOG_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "catalog"


def _build(cls: type[Any], raw: Mapping[str, Any], extra_ok: frozenset[str]) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - known - extra_ok
    if unknown:
        raise ValueError(f"{cls.__name__} {raw.get('id', '?')}: unknown keys {sorted(unknown)}")
    return cls(**{k: v for k, v in raw.items() if k in known})


def chip_from_dict(raw: Mapping[str, Any]) -> ChipSpec:
    """Build a ChipSpec from a catalog entry (``price_per_hour_usd`` maps to price_per_hour)."""
    data = dict(raw)
    if "price_per_hour_usd" in data:
        data["price_per_hour"] = data.pop("price_per_hour_usd")
    spec: ChipSpec = _build(ChipSpec, data, frozenset({"notes", "estimate"}))
    return spec


def model_from_dict(raw: Mapping[str, Any]) -> ModelSpec:
    """Build a ModelSpec from a catalog entry."""
    spec: ModelSpec = _build(ModelSpec, raw, frozenset({"notes"}))
    return spec


def _load_entries(path: Path, key: str) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        data = json.load(fh)
    entries = data.get(key) if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected an object with a list under {key!r}")
    return entries


def load_chip_entries(catalog_dir: Path = CATALOG_DIR) -> list[dict[str, Any]]:
    """The raw chip catalog entries (with notes and sources), as the control plane seeds them."""
    return _load_entries(catalog_dir / "chips.json", "chips")


def load_model_entries(catalog_dir: Path = CATALOG_DIR) -> list[dict[str, Any]]:
    """The raw model catalog entries (with notes and sources)."""
    return _load_entries(catalog_dir / "models.json", "models")


def _keyed(specs: list[Any], filename: str) -> dict[str, Any]:
    keyed: dict[str, Any] = {}
    for spec in specs:
        if spec.id in keyed:
            raise ValueError(f"{filename}: duplicate id {spec.id!r}")
        keyed[spec.id] = spec
    return keyed


def load_chips(catalog_dir: Path = CATALOG_DIR) -> dict[str, ChipSpec]:
    """Chips of the catalog keyed by their stable kebab-case id (``h100-sxm``)."""
    return _keyed([chip_from_dict(raw) for raw in load_chip_entries(catalog_dir)], "chips.json")


def load_models(catalog_dir: Path = CATALOG_DIR) -> dict[str, ModelSpec]:
    """Models of the catalog keyed by their stable kebab-case id (``deepseek-v3``)."""
    return _keyed([model_from_dict(raw) for raw in load_model_entries(catalog_dir)], "models.json")


def topology_from_dict(
    raw: Mapping[str, Any],
    chips: Mapping[str, ChipSpec] | None = None,
    models: Mapping[str, ModelSpec] | None = None,
) -> Topology:
    """Build a Topology from plain data: ``{"sites": [...], "links": [...], "pools": [...]}``.

    Chips and models default to the catalog, so pools may name them by catalog id.
    """
    try:
        sites = tuple(_build(SiteSpec, s, frozenset({"description"})) for s in raw["sites"])
        links = tuple(_build(LinkSpec, x, frozenset()) for x in raw.get("links", ()))
        pools = tuple(_build(PoolSpec, p, frozenset({"name"})) for p in raw.get("pools", ()))
    except KeyError as exc:
        raise SpecError("topology", f"missing key {exc.args[0]!r}") from None
    except TypeError as exc:
        raise SpecError("topology", f"{exc}") from None
    return Topology(
        sites=sites,
        links=links,
        pools=pools,
        chips=dict(chips if chips is not None else load_chips()),
        models=dict(models if models is not None else load_models()),
    )


def load_topology(path: Path) -> Topology:
    """Read a topology JSON file such as ``fixtures/demo/topology.json``; every pool's shape
    must obey ``specs.shape`` (``ShapeError`` naming the pool and the rule)."""
    with Path(path).open(encoding="utf-8") as fh:
        raw = json.load(fh)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object")
    topology = topology_from_dict(raw)
    topology.check_shapes()
    return topology
