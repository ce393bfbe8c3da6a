"""A fleet file (TOML): regions, sites, their chip inventory, WAN lines, models and tenants.

Where a scenario (``pdd_core.scenario``) is one model on two sites, a fleet is what an operator
runs: several datacenters in a few regions, thousands of chips of several kinds, several models,
and tenants whose agentic sessions follow their region's day. ``fixtures/fleets/fleet.toml``
is the example; every table is checked and every error names its key, e.g. ``fleet.toml:
[[tenants]] #3 model: unknown catalog model 'llama-9'``.

```toml
[fleet]
name = "fleet-5dc"
seed = 29
diurnal_amplitude = 0.5        # session rate (1 + A cos(...)): the peak is 3x the trough
window_s = 3600                # the peak window each demand's designs are verified on

[[regions]]
id = "us"
peak_utc_hour = 19             # when this region's sessions start fastest

[[sites]]                      # as in a scenario, with the region it sits in
id = "us-east"
region = "us"

[[inventory]]                  # chips a site offers (catalog id, count, roles they may play)
site = "us-east"
chip = "h200"
chips = 2048

[[links]]                      # as in a scenario: an RDMA fabric per site, WAN lines between
...

[[models]]                     # each served model with its SLA and price book
id = "llama-3.1-70b"
sla = { ttft_p90_s = 2.0, ttft_p99_s = 5.0, tpot_p90_s = 0.05, tpot_p99_s = 0.1 }
prices = { miss_input_per_mtok = 0.6, hit_input_per_mtok = 0.06, output_per_mtok = 2.4 }

[[tenants]]                    # who sends sessions, of which model, from which region
id = "acme-code"
model = "llama-3.1-70b"
region = "us"
sessions_per_day = 40000
workload = { turns_mean = 30 } # AgenticWorkload fields that differ from its defaults

[engine]                       # SimConfig, as a scenario's [engine]
[routing]                      # RoutingTable, as a scenario's [routing]
[planner]                      # PlannerSettings, plus the fleet's own keys (FleetSettings)
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from pdd_core.planner.from_scenario import settings_from_dict
from pdd_core.planner.inputs import PlannerSettings
from pdd_core.routing import RoutingTable
from pdd_core.scenario import build_table, engine_config, no_unknown_keys, read_toml, table_of
from pdd_core.sim import SimConfig
from pdd_core.specs import (
    SLA,
    ChipSpec,
    LinkKind,
    LinkSpec,
    ModelSpec,
    PriceBook,
    Role,
    SiteSpec,
    load_chips,
    load_models,
)
from pdd_core.workload import AgenticWorkload

TOP_LEVEL = frozenset(
    {
        "fleet",
        "regions",
        "sites",
        "inventory",
        "links",
        "models",
        "tenants",
        "engine",
        "routing",
        "planner",
    }
)
ALL_ROLES = ("P", "RLD", "MD")


@dataclass(frozen=True, slots=True)
class Region:
    """A region and the UTC hour its users start sessions fastest."""

    id: str
    peak_utc_hour: float


@dataclass(frozen=True, slots=True)
class Stock:
    """``chips`` chips of ``chip`` in ``site`` that may play ``roles``."""

    site: str
    chip: str
    chips: int
    roles: tuple[Role, ...]


@dataclass(frozen=True, slots=True)
class ServedModel:
    """A model the fleet serves, with the SLA its requests are judged by and their prices."""

    model: ModelSpec
    sla: SLA
    prices: PriceBook


@dataclass(frozen=True, slots=True)
class Tenant:
    """A customer sending ``sessions_per_day`` agentic sessions of ``model`` from ``region``."""

    id: str
    model: str
    region: str
    sessions_per_day: int
    workload: AgenticWorkload


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """How the fleet planner works (not physics).

    - ``slice_requests``: the requests of the peak window each demand's design search runs on;
      a demand with more is searched on every k-th of its sessions (k chosen so about this many
      remain) and the design found is scaled by k, then shrunk while the whole window, simulated
      at full rate, still meets the SLA (``scale_steps`` bisection steps);
    - ``nearby_rtt_ms``: WAN lines at most this long join a demand's sites to remote MD sites.
    """

    slice_requests: int = 4000
    scale_steps: int = 4
    nearby_rtt_ms: float = 200.0

    def __post_init__(self) -> None:
        if self.slice_requests < 100:
            raise ValueError(f"slice_requests: must be at least 100, got {self.slice_requests!r}")
        if self.scale_steps < 0:
            raise ValueError(f"scale_steps: must be non-negative, got {self.scale_steps!r}")
        if not self.nearby_rtt_ms > 0:
            raise ValueError(f"nearby_rtt_ms: must be positive, got {self.nearby_rtt_ms!r}")


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """A loaded, validated fleet file."""

    name: str
    description: str
    seed: int
    diurnal_amplitude: float
    window_s: float
    regions: tuple[Region, ...]
    sites: tuple[SiteSpec, ...]
    inventory: tuple[Stock, ...]
    links: tuple[LinkSpec, ...]
    models: Mapping[str, ServedModel]
    tenants: tuple[Tenant, ...]
    chips: Mapping[str, ChipSpec]
    config: SimConfig
    table: RoutingTable
    planner: PlannerSettings
    settings: FleetSettings

    def region(self, region_id: str) -> Region:
        return next(r for r in self.regions if r.id == region_id)

    def sites_in(self, region_id: str) -> tuple[str, ...]:
        return tuple(s.id for s in self.sites if s.region == region_id)

    def wan_lines(self) -> tuple[LinkSpec, ...]:
        return tuple(link for link in self.links if link.kind is LinkKind.WAN)

    def total_chips(self) -> int:
        return sum(s.chips for s in self.inventory)


def load_fleet(path: Path | str) -> FleetSpec:
    """Read and validate a fleet file."""
    path = Path(path)
    raw = read_toml(path)
    try:
        return fleet_from_dict(raw)
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None


def is_fleet(raw: Mapping[str, Any]) -> bool:
    """Whether parsed TOML is a fleet file (it has a ``[fleet]`` table) rather than a scenario."""
    return "fleet" in raw


def fleet_from_dict(raw: Mapping[str, Any]) -> FleetSpec:
    """Build a ``FleetSpec`` from parsed TOML (see the module docstring for the tables)."""
    no_unknown_keys("", raw, TOP_LEVEL)
    head = table_of(raw, "fleet")
    known = frozenset({"name", "description", "seed", "diurnal_amplitude", "window_s"})
    no_unknown_keys("fleet", head, known)
    amplitude = _number(head, "fleet", "diurnal_amplitude", 0.5)
    if not 0.0 <= amplitude < 1.0:
        raise ValueError(f"[fleet] diurnal_amplitude: must be in [0, 1), got {amplitude!r}")
    window_s = _number(head, "fleet", "window_s", 3600.0)
    if not 60.0 <= window_s <= 86_400.0:
        raise ValueError(f"[fleet] window_s: must be between 60 and 86400, got {window_s!r}")
    chips = load_chips()
    regions = _regions(_array(raw, "regions"))
    sites = _sites(_array(raw, "sites"), {r.id for r in regions})
    site_ids = {s.id for s in sites}
    planner_raw = dict(table_of(raw, "planner"))
    fleet_keys = {f.name for f in fields(FleetSettings)}
    fleet_settings = build_table(
        "planner", FleetSettings, {k: v for k, v in planner_raw.items() if k in fleet_keys}
    )
    return FleetSpec(
        name=str(head.get("name", "")),
        description=str(head.get("description", "")),
        seed=int(head.get("seed", 0)),
        diurnal_amplitude=amplitude,
        window_s=window_s,
        regions=regions,
        sites=sites,
        inventory=_inventory(_array(raw, "inventory"), site_ids, chips),
        links=_links(_array(raw, "links"), site_ids),
        models=_models(_array(raw, "models")),
        tenants=_tenants(_array(raw, "tenants"), raw),
        chips=chips,
        config=engine_config(raw, closed_loop_default=True),
        table=build_table("routing", RoutingTable, table_of(raw, "routing")),
        planner=settings_from_dict({k: v for k, v in planner_raw.items() if k not in fleet_keys}),
        settings=fleet_settings,
    )


def _array(raw: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not value:
        raise ValueError(f"[[{key}]]: at least one entry is required")
    for index, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise ValueError(f"[[{key}]] #{index + 1}: must be a table")
    return value


def _number(raw: Mapping[str, Any], where: str, key: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"[{where}] {key}: must be a number, got {value!r}")
    return float(value)


def _regions(entries: Sequence[Mapping[str, Any]]) -> tuple[Region, ...]:
    regions = []
    for index, entry in enumerate(entries):
        where = f"regions #{index + 1}"
        no_unknown_keys(where, entry, frozenset({"id", "peak_utc_hour"}))
        hour = _number(entry, where, "peak_utc_hour", 14.0)
        if not 0.0 <= hour < 24.0:
            raise ValueError(f"[[{where}]] peak_utc_hour: must be in [0, 24), got {hour!r}")
        regions.append(Region(str(entry.get("id", "")), hour))
    _unique("regions", [r.id for r in regions])
    return tuple(regions)


def _sites(entries: Sequence[Mapping[str, Any]], regions: set[str]) -> tuple[SiteSpec, ...]:
    sites = []
    for index, entry in enumerate(entries):
        where = f"sites #{index + 1}"
        no_unknown_keys(where, entry, frozenset({"id", "name", "region"}))
        if entry.get("region") not in regions:
            raise ValueError(f"[[{where}]] region: unknown region {entry.get('region')!r}")
        sites.append(build_table(where, SiteSpec, entry))
    _unique("sites", [s.id for s in sites])
    return tuple(sites)


def _inventory(
    entries: Sequence[Mapping[str, Any]], sites: set[str], chips: Mapping[str, ChipSpec]
) -> tuple[Stock, ...]:
    stock = []
    for index, entry in enumerate(entries):
        where = f"[[inventory]] #{index + 1}"
        no_unknown_keys(
            f"inventory #{index + 1}", entry, frozenset({"site", "chip", "chips", "roles"})
        )
        if entry.get("site") not in sites:
            raise ValueError(f"{where} site: unknown site {entry.get('site')!r}")
        if entry.get("chip") not in chips:
            raise ValueError(f"{where} chip: unknown catalog chip {entry.get('chip')!r}")
        count = entry.get("chips")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{where} chips: must be a positive integer, got {count!r}")
        try:
            roles = tuple(Role(r) for r in entry.get("roles", ALL_ROLES))
        except ValueError:
            raise ValueError(f"{where} roles: each must be P, RLD or MD") from None
        stock.append(Stock(str(entry["site"]), str(entry["chip"]), count, roles))
    _unique("inventory", [f"{s.site}/{s.chip}" for s in stock])
    return tuple(stock)


def _links(entries: Sequence[Mapping[str, Any]], sites: set[str]) -> tuple[LinkSpec, ...]:
    links = []
    for index, entry in enumerate(entries):
        where = f"links #{index + 1}"
        for end in ("source_site", "target_site"):
            if entry.get(end) not in sites:
                raise ValueError(f"[[{where}]] {end}: unknown site {entry.get(end)!r}")
        links.append(build_table(where, LinkSpec, entry))
    _unique("links", [link.id for link in links])
    fabrics = {link.source_site for link in links if link.kind is LinkKind.RDMA}
    missing = sorted(sites - fabrics)
    if missing:
        raise ValueError(f"[[links]]: site {missing[0]!r} has no rdma fabric (a link to itself)")
    return tuple(links)


def _models(entries: Sequence[Mapping[str, Any]]) -> dict[str, ServedModel]:
    catalog = load_models()
    served = {}
    for index, entry in enumerate(entries):
        where = f"models #{index + 1}"
        no_unknown_keys(where, entry, frozenset({"id", "sla", "prices"}))
        model_id = entry.get("id")
        if model_id not in catalog:
            raise ValueError(f"[[{where}]] id: unknown catalog model {model_id!r}")
        if model_id in served:
            raise ValueError(f"[[{where}]] id: {model_id!r} is listed twice")
        served[str(model_id)] = ServedModel(
            catalog[str(model_id)],
            build_table(f"{where}.sla", SLA, table_of(entry, "sla")),
            build_table(f"{where}.prices", PriceBook, table_of(entry, "prices")),
        )
    return served


def _tenants(entries: Sequence[Mapping[str, Any]], raw: Mapping[str, Any]) -> tuple[Tenant, ...]:
    models = {str(m.get("id")) for m in raw.get("models", []) if isinstance(m, Mapping)}
    regions = {str(r.get("id")) for r in raw.get("regions", []) if isinstance(r, Mapping)}
    block = int(table_of(raw, "engine").get("block_size", SimConfig().block_size))
    tenants = []
    for index, entry in enumerate(entries):
        where = f"tenants #{index + 1}"
        known = frozenset({"id", "model", "region", "sessions_per_day", "workload"})
        no_unknown_keys(where, entry, known)
        if entry.get("model") not in models:
            raise ValueError(f"[[{where}]] model: not one of [[models]]: {entry.get('model')!r}")
        if entry.get("region") not in regions:
            raise ValueError(f"[[{where}]] region: unknown region {entry.get('region')!r}")
        sessions = entry.get("sessions_per_day")
        if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1:
            raise ValueError(
                f"[[{where}]] sessions_per_day: must be a positive integer, got {sessions!r}"
            )
        workload = build_table(f"{where}.workload", AgenticWorkload, table_of(entry, "workload"))
        tenants.append(
            Tenant(
                id=str(entry.get("id", "")),
                model=str(entry["model"]),
                region=str(entry["region"]),
                sessions_per_day=sessions,
                # The session count and rate are the fleet's (its day); blocks are the engine's.
                workload=replace(workload, block_size=block),
            )
        )
    _unique("tenants", [t.id for t in tenants])
    return tuple(tenants)


def _unique(key: str, ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for value in ids:
        if not value:
            raise ValueError(f"[[{key}]]: every entry needs an id")
        if value in seen:
            raise ValueError(f"[[{key}]]: {value!r} is listed twice")
        seen.add(value)
