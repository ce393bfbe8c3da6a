"""Build ``PlannerInputs`` from a scenario file's tables, including its ``[planner]`` table.

```toml
[planner]
verify = 2                 # PlannerSettings fields, all optional
bathtub_points = 11

[[planner.candidates]]     # chips available per site, with a count limit and allowed roles
site = "dc-a"
chip = "gpu-a"
max_chips = 192
roles = ["P", "RLD"]
```

Without candidates, every (site, chip) of the scenario's pools and baseline pools is a
candidate for every role it plays there, limited to four times the chips the scenario gives it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from pdd_core.planner.inputs import CandidateChip, PlannerInputs, PlannerSettings
from pdd_core.scenario import Scenario
from pdd_core.specs import Role
from pdd_core.workload import Request

_SETTINGS = frozenset(f.name for f in fields(PlannerSettings))


def settings_from_dict(raw: Mapping[str, Any]) -> PlannerSettings:
    """``[planner]`` keys other than ``candidates`` are ``PlannerSettings`` fields."""
    values = {k: v for k, v in raw.items() if k != "candidates"}
    unknown = sorted(set(values) - _SETTINGS)
    if unknown:
        known = ", ".join(sorted(_SETTINGS))
        raise ValueError(f"[planner] unknown key {unknown[0]!r} (known: candidates, {known})")
    for key in ("transfer_budgets_s", "singular_min_inputs", "chunk_budgets", "recommend"):
        if key in values:
            values[key] = tuple(values[key])
    try:
        return PlannerSettings(**values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"[planner] {exc}") from None


def candidates_from_dict(
    raw: Sequence[Mapping[str, Any]], scenario: Scenario
) -> tuple[CandidateChip, ...]:
    """``[[planner.candidates]]`` entries, checked against the scenario's sites and chips."""
    sites = {s.id for s in scenario.pdd.sites}
    result = []
    for index, entry in enumerate(raw):
        where = f"[[planner.candidates]] #{index + 1}"
        unknown = sorted(set(entry) - {"site", "chip", "max_chips", "roles"})
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}")
        if entry.get("site") not in sites:
            raise ValueError(f"{where} site: unknown site {entry.get('site')!r}")
        if entry.get("chip") not in scenario.pdd.chips:
            raise ValueError(f"{where} chip: unknown catalog chip {entry.get('chip')!r}")
        try:
            roles = tuple(Role(r) for r in entry.get("roles", ["P", "RLD", "MD"]))
            result.append(
                CandidateChip(
                    str(entry["site"]), str(entry["chip"]), int(entry.get("max_chips", 0)), roles
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
    return tuple(result)


def default_candidates(scenario: Scenario) -> tuple[CandidateChip, ...]:
    """Every (site, chip) the scenario's pools use, for their roles, at 4x their chips."""
    found: dict[tuple[str, str], tuple[int, set[Role]]] = {}
    for pool in (*scenario.pdd.pools, *scenario.baseline.pools):
        chips, roles = found.get((pool.site, pool.chip), (0, set()))
        roles.add(pool.role)
        found[(pool.site, pool.chip)] = (chips + pool.instances * pool.chips_per_instance, roles)
    order = (Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE)
    return tuple(
        CandidateChip(site, chip, max(1, 4 * chips), tuple(r for r in order if r in roles))
        for (site, chip), (chips, roles) in sorted(found.items())
    )


def inputs_from_scenario(
    scenario: Scenario,
    requests: Sequence[Request] | None = None,
    *,
    closed_loop: bool | None = None,
) -> PlannerInputs:
    """Planner inputs of ``scenario`` (its workload unless ``requests`` is given).

    ``closed_loop`` sets how the given ``requests`` arrive (``SimConfig.closed_loop``; None:
    the scenario's own setting): a caller passing a recorded trace passes False, since a
    trace's sessions are replayed at their recorded times.
    """
    raw = scenario.planner
    candidates_raw = raw.get("candidates")
    if candidates_raw is not None and not isinstance(candidates_raw, list):
        raise ValueError("[[planner.candidates]] must be an array of tables")
    candidates = (
        candidates_from_dict(candidates_raw, scenario)
        if candidates_raw
        else default_candidates(scenario)
    )
    model = scenario.pdd.models[scenario.model_id]
    settings = settings_from_dict(raw)
    return PlannerInputs(
        name=scenario.name,
        model=model,
        chips=dict(scenario.pdd.chips),
        sites=scenario.pdd.sites,
        links=scenario.pdd.links,
        candidates=candidates,
        requests=list(requests) if requests is not None else scenario.workload.requests(),
        sla=scenario.sla,
        prices=scenario.prices,
        config=scenario.config
        if closed_loop is None
        else replace(scenario.config, closed_loop=closed_loop),
        table=scenario.table,
        settings=settings,
        seed=scenario.config.seed,
        workload=scenario.workload
        if requests is None and scenario.workload.trace is None
        else None,
    )
