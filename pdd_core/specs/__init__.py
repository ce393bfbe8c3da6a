"""Specifications of chips, models, links, sites, SLAs and prices, and the catalogs they load from.

``core`` holds the frozen, validated hardware and contract dataclasses (chips, models, SLAs,
prices), ``deployment`` the sites, links, pools and topology, ``shape`` the instance-shape
rules, ``catalog`` the loaders of ``fixtures/``.
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
    ModelSpec,
    PriceBook,
    RldMode,
    Role,
    SpecError,
)
from pdd_core.specs.deployment import LinkSpec, PoolSpec, SiteSpec, Topology
from pdd_core.specs.shape import (
    HBM_RESERVE_FRACTION,
    InstanceShape,
    ShapeError,
    ShapeRule,
    as_shape,
    check_request_fits,
    check_shape,
    kv_tokens_per_rank,
    pool_cost_per_hour,
    pool_nodes,
    valid_shapes,
)

__all__ = [
    "CATALOG_DIR",
    "GIB",
    "HBM_RESERVE_FRACTION",
    "SLA",
    "Attention",
    "ChipSpec",
    "InstanceShape",
    "LinkKind",
    "LinkSpec",
    "ModelSpec",
    "PoolSpec",
    "PriceBook",
    "RldMode",
    "Role",
    "ShapeError",
    "ShapeRule",
    "SiteSpec",
    "SpecError",
    "Topology",
    "as_shape",
    "check_request_fits",
    "check_shape",
    "chip_from_dict",
    "kv_tokens_per_rank",
    "load_chip_entries",
    "load_chips",
    "load_model_entries",
    "load_models",
    "load_topology",
    "model_from_dict",
    "pool_cost_per_hour",
    "pool_nodes",
    "topology_from_dict",
    "valid_shapes",
]  # fmt: skip
