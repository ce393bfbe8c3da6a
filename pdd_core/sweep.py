"""Sweeps: many (scenario, policy, WAN bandwidth) points, each a run and a capacity search.

A sweep is what an operator asks when one ``pdd compare`` is not enough: the same designs over
several scenarios, or one scenario over several WAN bandwidths. Each point is independent of the
others, so a point is the unit a caller fans out (the control plane runs one Celery task per
point; ``run_sweep`` runs them one after another in this process). A point is:

- the scenario's workload simulated once under ``policy`` at its own rate (``Scenario.run``): the
  fixed-load goodput, SLA verdict and attainment, TTFT P99;
- ``pdd_core.sim.capacity.find_capacity`` on the same requests: the highest session factor at
  which the scenario's SLA holds, its offered rate (the capacity), and capacity over cost (BCR).

``pdd compare`` runs a point per policy through ``policy_run``, the one implementation of both.
A WAN bandwidth replaces the ``bandwidth_gbps`` of every WAN link of the scenario (the PDD and
baseline topologies alike); a scenario without a WAN link cannot be swept over bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pdd_core.scenario import Scenario
from pdd_core.sim import POLICIES, Policy, SimResult
from pdd_core.sim.capacity import Capacity, find_capacity
from pdd_core.specs import LinkKind, Topology
from pdd_core.units import bcr_per_dollar

POLICY_NAMES: tuple[str, ...] = tuple(str(p) for p in POLICIES)


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One unit of a sweep: a scenario (by the name its loader knows), a policy, and the WAN
    bandwidth that replaces the scenario's own (``None`` keeps it)."""

    scenario: str
    policy: str
    wan_gbps: float | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICY_NAMES:
            raise ValueError(
                f"policy: must be one of {', '.join(POLICY_NAMES)}, got {self.policy!r}"
            )
        if self.wan_gbps is not None and not (math.isfinite(self.wan_gbps) and self.wan_gbps > 0):
            raise ValueError(f"wan_gbps: must be a positive number, got {self.wan_gbps!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "policy": self.policy, "wan_gbps": self.wan_gbps}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SweepPoint:
        wan = raw.get("wan_gbps")
        return cls(str(raw["scenario"]), str(raw["policy"]), None if wan is None else float(wan))


@dataclass(frozen=True, slots=True)
class SweepRow:
    """What one point measured (module docstring). ``capacity_rps`` is 0 when the SLA held at no
    load tried; ``bound`` names the search limit it stopped at (``""`` when it found a boundary,
    ``"skipped"`` when no capacity search ran)."""

    scenario: str
    policy: str
    wan_gbps: float | None
    requests: int
    goodput_rps: float
    sla_met: bool
    sla_attainment: float
    ttft_p99: float
    cost_per_hour: float
    capacity_rps: float
    session_factor: float
    bcr: float
    bound: str
    simulations: int

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON: NaN and infinities become ``None``."""
        return {
            name: None if isinstance(v, float) and not math.isfinite(v) else v
            for name in self.__slots__
            for v in (getattr(self, name),)
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SweepRow:
        values = {name: raw[name] for name in cls.__slots__}
        for name in ("goodput_rps", "sla_attainment", "ttft_p99", "capacity_rps", "bcr"):
            values[name] = math.nan if values[name] is None else float(values[name])
        return cls(**values)


def sweep_points(
    scenarios: Sequence[str],
    policies: Sequence[str] = POLICY_NAMES,
    wan_gbps: Sequence[float] = (),
) -> list[SweepPoint]:
    """The cross product, scenario-major (the order of the result table); no WAN bandwidths keep
    each scenario's own. Duplicates and empty lists are errors, not silently dropped."""
    for name, given in (("scenarios", scenarios), ("policies", policies), ("wan_gbps", wan_gbps)):
        if len(set(given)) != len(given):
            raise ValueError(f"{name}: lists a value twice")
    if not scenarios:
        raise ValueError("scenarios: give at least one")
    if not policies:
        raise ValueError("policies: give at least one")
    bandwidths: Sequence[float | None] = wan_gbps or (None,)
    return [
        SweepPoint(scenario, policy, wan)
        for scenario in scenarios
        for wan in bandwidths
        for policy in policies
    ]


def with_wan_gbps(scenario: Scenario, gbps: float) -> Scenario:
    """The scenario with every WAN link at ``gbps`` (PDD and baseline topologies alike)."""

    def swap(topology: Topology) -> Topology:
        links = tuple(
            replace(link, bandwidth_gbps=gbps) if link.kind is LinkKind.WAN else link
            for link in topology.links
        )
        return replace(topology, links=links)

    if not any(link.kind is LinkKind.WAN for link in scenario.pdd.links):
        raise ValueError(f"{scenario.name or 'scenario'}: has no WAN link to set to {gbps:g} Gbps")
    return replace(scenario, pdd=swap(scenario.pdd), baseline=swap(scenario.baseline))


def policy_run(
    scenario: Scenario,
    policy: Policy | str,
    requests: list[Any],
    *,
    capacity: bool = True,
    iterations: int = 3,
    progress: Callable[[int], None] | None = None,
) -> tuple[SimResult, Capacity | None]:
    """Simulate ``policy`` on ``requests`` at their own rate, then (with ``capacity``) search the
    highest session factor meeting the scenario's SLA (``find_capacity``)."""
    if iterations < 0:
        raise ValueError(f"iterations: must be non-negative, got {iterations}")
    result = scenario.run(policy, requests, progress=progress)
    if not capacity:
        return result, None

    def run(load: list[Any]) -> list[Any]:
        return scenario.run(policy, load).records

    found = find_capacity(
        run,
        requests,
        scenario.sla,
        scenario.topology_for(policy).cost_per_hour(),
        iterations=iterations,
        seed=scenario.config.seed,
    )
    return result, found


def run_point(scenario: Scenario, point: SweepPoint, *, iterations: int = 3) -> SweepRow:
    """One point of a sweep on an already loaded ``scenario`` (the one ``point.scenario`` names)."""
    if point.wan_gbps is not None:
        scenario = with_wan_gbps(scenario, point.wan_gbps)
    requests = scenario.workload.requests()
    result, found = policy_run(scenario, point.policy, requests, iterations=iterations)
    assert found is not None
    s = result.summary
    return SweepRow(
        scenario=point.scenario,
        policy=point.policy,
        wan_gbps=point.wan_gbps,
        requests=s.requests,
        goodput_rps=s.goodput_rps,
        sla_met=bool(s.sla_met),
        sla_attainment=s.sla_attainment,
        ttft_p99=s.ttft_p99,
        cost_per_hour=found.cost_per_hour,
        capacity_rps=found.goodput_rps,
        session_factor=found.factor,
        bcr=found.bcr,
        bound=found.bound,
        simulations=1 + len(found.probes),
    )


def run_sweep(
    load: Callable[[str], Scenario],
    points: Sequence[SweepPoint],
    *,
    iterations: int = 3,
    progress: Callable[[int, SweepRow], None] | None = None,
) -> list[SweepRow]:
    """Every point in this process, in order (the serial baseline of a fanned-out sweep);
    ``load`` turns a point's scenario name into a ``Scenario`` (loaded once per name)."""
    loaded: dict[str, Scenario] = {}
    rows = []
    for index, point in enumerate(points):
        if point.scenario not in loaded:
            loaded[point.scenario] = load(point.scenario)
        rows.append(run_point(loaded[point.scenario], point, iterations=iterations))
        if progress is not None:
            progress(index + 1, rows[-1])
    return rows


TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("scenario", "scenario"),
    ("policy", "policy"),
    ("wan_gbps", "WAN Gbps"),
    ("goodput_rps", "goodput req/s"),
    ("sla_met", "SLA met"),
    ("capacity_rps", "capacity req/s"),
    ("cost_per_hour", "$/h"),
    ("bcr", "good req/$"),
    ("bound", "bound"),
)


def sweep_table(rows: Sequence[SweepRow]) -> str:
    """A plain-text table of the rows, one line per point (``-`` for a missing figure)."""

    def cell(row: SweepRow, key: str) -> str:
        value = getattr(row, key)
        if key == "bcr":
            value = bcr_per_dollar(value)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
        return str(value)

    grid = [[label for _, label in TABLE_COLUMNS]]
    grid += [[cell(row, key) for key, _ in TABLE_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(TABLE_COLUMNS))]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in grid
    )
