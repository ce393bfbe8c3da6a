"""Has the live workload drifted from the one a plan was made for?

A plan is sized for a workload (``Plan.search["workload"]``: arrival rate, mean prefix hit, mean
input and output lengths); the live window's figures are compared with it field by field, and
each one beyond its tolerance is a drift: the plan's sizing and its bathtub no longer describe
what is served, so it is time to plan again from the live window.

Tolerances (``Tolerances``; docs/planner.md "Drift" states the same):

- mean prefix hit rate: 0.10 absolute, about one step of the bathtub's 11-point grid
  (``bathtub.hit_grid``: 0.098): a move of one grid step puts the workload at another point of
  the curve the plan drew;
- arrival rate: 25 % relative, up or down: above, the pools run beyond the rate they were sized
  for; below, chips are paid for that nothing needs;
- mean input and mean output lengths: 25 % relative each (prefill work per request scales with
  the input, decode occupancy with the output).

A figure the plan did not record (plans made before lengths were kept) or the live window lacks
(no served request) is not judged and says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class WorkloadFigures:
    """The figures drift is judged on (None: not known)."""

    rate_rps: float | None
    mean_hit: float | None
    mean_input_tokens: float | None
    mean_output_tokens: float | None

    @classmethod
    def of_plan(cls, search_workload: Any) -> WorkloadFigures:
        """From a plan's ``search["workload"]`` (missing keys: not known)."""
        raw = search_workload if isinstance(search_workload, dict) else {}

        def number(key: str) -> float | None:
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return float(value)

        return cls(number("rate_rps"), number("mean_hit"), number("mean_input_tokens"),
                   number("mean_output_tokens"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Tolerances:
    """How far each live figure may be from the plan's before it is a drift."""

    hit_abs: float = 0.10
    rate_rel: float = 0.25
    input_rel: float = 0.25
    output_rel: float = 0.25


@dataclass(frozen=True, slots=True)
class Check:
    """One figure: the plan's, the live one, the tolerance in words, and the verdict
    (``drifted`` None: not judged, one side unknown)."""

    field: str
    label: str
    planned: float | None
    live: float | None
    tolerance: str
    drifted: bool | None


def checks(
    planned: WorkloadFigures, live: WorkloadFigures, tol: Tolerances = Tolerances()
) -> list[Check]:
    """Each figure judged against its tolerance (see the module docstring)."""
    out = []
    for field, label, rel, limit in (
        ("mean_hit", "mean prefix hit rate", False, tol.hit_abs),
        ("rate_rps", "arrival rate (req/s)", True, tol.rate_rel),
        ("mean_input_tokens", "mean input length (tokens)", True, tol.input_rel),
        ("mean_output_tokens", "mean output length (tokens)", True, tol.output_rel),
    ):
        a, b = getattr(planned, field), getattr(live, field)
        text = f"±{limit:.0%}" if rel else f"±{limit:.2f}"
        drifted: bool | None = None
        if a is not None and b is not None:
            bound = limit * a if rel else limit
            drifted = abs(b - a) > bound if (a > 0 or not rel) else b > 0
        out.append(Check(field, label, a, b, text, drifted))
    return out


def bathtub_position(
    bathtub: Any, live_hit: float | None, live_rate: float | None
) -> dict[str, float] | None:
    """Where the live workload sits on a plan's bathtub (``Bathtub.to_dict()``): its hit rate,
    the curve's revenue per cost there (linear between the two grid points around it) and its
    load: the live rate over the curve's SLA goodput at that hit rate (1.0: at the most the
    deployment serves within the SLA). None without a curve or a live hit rate."""
    points = (bathtub or {}).get("points") if isinstance(bathtub, dict) else None
    if not points or live_hit is None:
        return None
    xs = [float(p["hit_rate"]) for p in points]
    hit = min(max(live_hit, xs[0]), xs[-1])

    def at(key: str) -> float | None:
        for left, right in itertools.pairwise(points):
            x0, x1 = float(left["hit_rate"]), float(right["hit_rate"])
            if x0 <= hit <= x1 and left.get(key) is not None and right.get(key) is not None:
                t = 0.0 if x1 == x0 else (hit - x0) / (x1 - x0)
                return float(left[key]) + t * (float(right[key]) - float(left[key]))
        value = points[0].get(key) if len(points) == 1 else None
        return None if value is None else float(value)

    out: dict[str, float] = {"hit_rate": live_hit}
    revenue = at("revenue_per_cost")
    if revenue is not None:
        out["revenue_per_cost"] = revenue
    goodput = at("goodput_rps")
    if goodput and live_rate is not None:
        out["load"] = live_rate / goodput
    return out
