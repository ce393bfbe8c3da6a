"""Specifications of chips, models, links, sites, SLAs and prices, and the catalogs they load from.

``core`` holds the frozen, validated dataclasses; ``catalog`` the loaders of ``fixtures/``.
Everything is re-exported here: callers import from ``pdd_core.specs``.
"""

from pdd_core.specs.catalog import (
    CATALOG_DIR,
    chip_from_dict,
    load_chip_entries,
    load_chips,
    load_model_entries,
    load_models,
    load_topology,
    model_from_dict,
    topology_from_dict,
)
from pdd_core.specs.core import (
    GIB,
    SLA,
    Attention,
    ChipSpec,
    LinkKind,
    LinkSpec,
    ModelSpec,
    PoolSpec,
    PriceBook,
    Role,
    SiteSpec,
    SpecError,
    Topology,
)

__all__ = [
    "CATALOG_DIR", "GIB", "SLA", "Attention", "ChipSpec", "LinkKind", "LinkSpec", "ModelSpec",
    "PoolSpec", "PriceBook", "Role", "SiteSpec", "SpecError", "Topology", "chip_from_dict",
    "load_chip_entries", "load_chips", "load_model_entries", "load_models", "load_topology",
    "model_from_dict", "topology_from_dict",
]  # fmt: skip
