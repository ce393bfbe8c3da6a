"""Catalog loaders: the chip and model catalogs of ``fixtures/catalog/`` and topology files.

Both halves of the product read these same files: ``pdd_core`` through the functions below, the
control plane by seeding its database from ``load_*_entries`` (``manage.py seed_demo``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields, replace
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


# Published kernel measurements a chip entry may carry under ``measured`` (absolute rates on
# that chip, each with its source in ``source``): BF16 GEMM and attention TFLOP/s, HBM TB/s.
MEASURED_KEYS = frozenset({"gemm_bf16_tflops", "attention_bf16_tflops", "hbm_tbps", "source"})


def chip_from_dict(raw: Mapping[str, Any]) -> ChipSpec:
    """Build a ChipSpec from a catalog entry (``price_per_hour_usd`` maps to price_per_hour).

    An entry's ``measured`` kernels bound its efficiencies: where the catalog's figure is above
    what a published measurement on that chip reaches (GEMM or attention TFLOP/s over the dense
    BF16 peak; HBM TB/s over the rated bandwidth), the measured figure is used.
    """
    data = dict(raw)
    if "price_per_hour_usd" in data:
        data["price_per_hour"] = data.pop("price_per_hour_usd")
    measured = data.pop("measured", None)
    spec: ChipSpec = _build(ChipSpec, data, frozenset({"notes", "estimate"}))
    if measured is None:
        return spec
    return measured_bound(spec, measured)


def measured_bound(spec: ChipSpec, measured: Mapping[str, Any]) -> ChipSpec:
    """``spec`` with each efficiency at most what ``measured`` kernels reach on it."""
    if not isinstance(measured, Mapping) or not measured.get("source"):
        raise ValueError(f"ChipSpec {spec.id}: measured must be a table with its source")
    unknown = sorted(set(measured) - MEASURED_KEYS)
    if unknown:
        raise ValueError(f"ChipSpec {spec.id}: unknown measured keys {unknown}")
    for key in MEASURED_KEYS - {"source"}:
        value = measured.get(key)
        if value is not None and (isinstance(value, bool) or not float(value) > 0):
            raise ValueError(f"ChipSpec {spec.id}: measured {key} must be positive, got {value!r}")
    compute = [
        float(measured[k]) / spec.bf16_tflops
        for k in ("gemm_bf16_tflops", "attention_bf16_tflops")
        if measured.get(k) is not None
    ]
    memory = [float(measured["hbm_tbps"]) / spec.hbm_tbps] if measured.get("hbm_tbps") else []
    return replace(
        spec,
        compute_efficiency=min([spec.compute_efficiency, *compute]),
        memory_efficiency=min([spec.memory_efficiency, *memory]),
    )


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
