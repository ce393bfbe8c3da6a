"""What the planner is asked: sites, links, candidate chips with limits, model, workload, SLA.

``PlannerInputs`` is plain data. ``inputs_from_scenario`` builds it from a scenario file: its
``[planner]`` table lists the candidate chips per site (with count limits and the roles they may
play); without one, every (site, chip) of the scenario's pools is a candidate with a limit of
four times the chips the scenario gives it, so old scenario files can be planned too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pdd_core.planner.design import FAMILIES, Design
from pdd_core.routing import RoutingTable
from pdd_core.scenario import WorkloadSpec
from pdd_core.sim import SimConfig
from pdd_core.specs import SLA, ChipSpec, LinkSpec, ModelSpec, PriceBook, Role, SiteSpec
from pdd_core.workload import Request

ALL_ROLES: tuple[Role, ...] = (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE)


@dataclass(frozen=True, slots=True)
class CandidateChip:
    """Up to ``max_chips`` chips of ``chip`` are available in ``site`` for ``roles``.

    ``roles`` place PDD's pools; the one-site families (same-dc, aggregated) may use the chips
    for both phases whatever the roles, so every family is searched on the same inventory,
    unless ``one_site`` is False (a fleet's remote decode site, far from the demand's users,
    where only PDD's main decode may run: ``pdd_core.fleet.demand``).
    """

    site: str
    chip: str
    max_chips: int
    roles: tuple[Role, ...] = ALL_ROLES
    one_site: bool = True

    def __post_init__(self) -> None:
        if self.max_chips < 1:
            raise ValueError(f"max_chips: must be at least 1, got {self.max_chips!r}")
        object.__setattr__(self, "roles", tuple(Role(r) for r in self.roles))


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    """How hard the planner works (not physics).

    - ``verify``: how many designs of each family the first round simulates (the control
      plane fans them out as one Celery group);
    - ``simulations``: the simulator runs each design family may spend (PDD, homogeneous and
      heterogeneous same-dc, aggregated: the same budget for every family, first round
      included), searching for its cheapest design that meets the SLA;
    - ``shapes_per_role``: instance shapes per role and chip the analytic screen keeps;
    - ``chunk_budgets``: the per-iteration token budgets searched for aggregated designs;
    - ``capacity_seeds``: independent workloads the verdict's capacity is measured over
      (``sim.capacity.measure_capacity``; 0 skips the measurement and the verdict says so);
    - ``capacity_resolution``: the relative rate step at which that search stops;
    - ``bathtub_points``: hit rates evaluated for the bathtub curve;
    - ``samples``: requests sampled for the analytic model;
    - ``transfer_budgets_s``: the P-MD transfer budgets the search tries;
    - ``tuning_max_requests``: the recommended PDD design's routing table is re-tuned by
      simulated capacity (``planner.tuning``) when the workload has at most this many requests;
      above it each candidate's capacity search costs more than the planner's CPU budget
      allows, and the table the sized search chose is kept (the reasons say which);
    - ``recommend``: the design families the plan may recommend, those the deployment can run
      (the control plane's data plane runs disaggregated roles, not aggregated instances).
      Every family is still searched alike and compared in the verdict; the reasons name a
      cheaper design of a family left out.
    """

    verify: int = 1
    simulations: int = 12
    shapes_per_role: int = 4
    chunk_budgets: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
    capacity_seeds: int = 5
    capacity_resolution: float = 0.02
    bathtub_points: int = 11
    samples: int = 2000
    transfer_budgets_s: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0)
    singular_min_inputs: tuple[int, ...] = (32_768, 65_536)
    tuning_max_requests: int = 2_000
    recommend: tuple[str, ...] = FAMILIES

    def __post_init__(self) -> None:
        for name in ("verify", "simulations", "shapes_per_role"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1, got {getattr(self, name)!r}")
        if self.capacity_seeds < 0:
            raise ValueError(f"capacity_seeds: must be non-negative, got {self.capacity_seeds!r}")
        if not 0.0 < self.capacity_resolution < 0.5:
            raise ValueError(
                f"capacity_resolution: must be in (0, 0.5), got {self.capacity_resolution!r}"
            )
        if any(int(c) < 1 for c in self.chunk_budgets):
            raise ValueError(f"chunk_budgets: must be positive, got {self.chunk_budgets!r}")
        unknown = [f for f in self.recommend if f not in FAMILIES]
        if unknown or not self.recommend:
            raise ValueError(
                f"recommend: name at least one of {', '.join(FAMILIES)}, got {self.recommend!r}"
            )


@dataclass(frozen=True, slots=True)
class PlannerInputs:
    """Everything a plan depends on (DOMAIN.md section 6's inputs), as plain data."""

    name: str
    model: ModelSpec
    chips: Mapping[str, ChipSpec]
    sites: tuple[SiteSpec, ...]
    links: tuple[LinkSpec, ...]
    candidates: tuple[CandidateChip, ...]
    requests: Sequence[Request]
    sla: SLA
    prices: PriceBook
    config: SimConfig
    table: RoutingTable = field(default_factory=RoutingTable)
    settings: PlannerSettings = field(default_factory=PlannerSettings)
    seed: int = 0
    # The generator behind ``requests`` when they were generated (``planner.evidence`` draws
    # the verdict's independent workloads from it at other seeds); None for a trace, whose
    # independent workloads are disjoint windows of ``requests``.
    workload: WorkloadSpec | None = None

    def candidates_for(self, role: Role, site: str | None = None) -> list[CandidateChip]:
        return [
            c
            for c in self.candidates
            if role in c.roles and (site is None or c.site == site) and c.chip in self.chips
        ]

    def limit(self, site: str, chip: str) -> int:
        return sum(c.max_chips for c in self.candidates if c.site == site and c.chip == chip)

    def limit_for(self, chip: str) -> int:
        """The most chips of ``chip`` any one site offers (bounds a single instance's tp)."""
        return max((self.limit(c.site, chip) for c in self.candidates if c.chip == chip), default=0)

    def over_limit(self, design: Design) -> str | None:
        """Why ``design`` exceeds a site's chip limit, or None when it fits."""
        used: dict[tuple[str, str], int] = {}
        for pool in design.pools:
            key = (pool.site, pool.chip)
            used[key] = used.get(key, 0) + pool.chips
        for (site, chip), chips in used.items():
            limit = self.limit(site, chip)
            if chips > limit:
                return f"needs {chips} x {chip} in {site}, the limit is {limit}"
        return None
