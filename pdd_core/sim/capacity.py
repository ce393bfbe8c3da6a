"""Goodput as a capacity: the highest arrival rate at which a design still meets its SLA.

A fixed-load goodput (good requests over the makespan) says how a design did on one load; it
cannot rank designs, because a design that is idle half the time and one that is saturated
score alike. Capacity answers the operator's question, "how much traffic can this design carry
within the SLA?", and BCR is that capacity over the design's cost per hour.

- **Load is raised by adding sessions, not by compressing time** (``scale_sessions``): a factor
  of 2.5 keeps every session of the workload, adds a second copy of each and a third copy of
  half of them (chosen by a seeded permutation). A copy is a new session: its requests get new
  ids, its private blocks new hashes (blocks shared by several sessions, such as system
  prompts, stay shared), and its start moves by a random fraction of the mean gap between
  session starts. Think times, turn counts and prefix reuse inside a session are unchanged,
  so a higher rate is more users, not impatient ones.
- **The SLA is ``pdd_core.metrics.window_sla``** over every request offered: rejected requests
  count as misses, so shedding load cannot buy a met SLA.
- **Search**: from factor 1, double (or halve) until the verdict flips, then bisect
  ``iterations`` times. Capacity is the offered rate of the load's schedule (requests over
  their arrival span as given) at the highest factor that met the SLA; 0 when even
  ``min_factor`` misses it. The verdict need not be monotone in the factor (queues are noisy);
  bisection returns one boundary. This single-seed search ranks routing tables and sweep
  points by the load they carry; under closed-loop sessions (``SimConfig.closed_loop``: a turn
  arrives after its predecessor's answer plus think time) the schedule's rate is an upper bound
  of what the design achieves, and the verdict's statistic (``sim.measure``) reports the
  achieved rate (``arrived_rps``: requests over their simulated arrival span).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from pdd_core.sim.records import SimulatedRequest
from pdd_core.sim.summary import sla_window
from pdd_core.specs import SLA
from pdd_core.workload import Request


@dataclass(frozen=True, slots=True)
class Probe:
    """One simulated load: the session factor, the offered rate and the SLA verdict."""

    factor: float
    offered_rps: float
    requests: int
    met: bool
    violated: str
    attainment: float


@dataclass(frozen=True, slots=True)
class Capacity:
    """The capacity of one design (see the module docstring).

    ``goodput_rps`` is the offered rate at ``factor``, the highest factor that met the SLA
    (0 and factor 0 when none did); ``bcr`` is it over ``cost_per_hour``; ``bound`` says when
    the search stopped at a limit instead of a boundary (``""``, ``"max_factor"`` or
    ``"min_factor"``). ``probes`` lists every load simulated, in order.
    """

    goodput_rps: float
    factor: float
    cost_per_hour: float
    bcr: float
    bound: str
    probes: tuple[Probe, ...]


def offered_rps(requests: Sequence[Request]) -> float:
    """Requests over their arrival span (0 for fewer than two requests)."""
    if len(requests) < 2:
        return 0.0
    span = requests[-1].arrival_s - requests[0].arrival_s
    return len(requests) / span if span > 0 else 0.0


def arrived_rps(records: Sequence[SimulatedRequest]) -> float:
    """Requests over the span of their arrivals *as simulated* (0 for fewer than two).

    An open-loop run's records arrive at the trace's times, so this is ``offered_rps`` of its
    requests; a closed-loop run's later turns arrive when the design let them (answer plus
    think time), so this is the rate the design achieved with those sessions.
    """
    if len(records) < 2:
        return 0.0
    first = min(r.arrival_s for r in records)
    last = max(r.arrival_s for r in records)
    return len(records) / (last - first) if last > first else 0.0


def scale_sessions(requests: Sequence[Request], factor: float, *, seed: int = 0) -> list[Request]:
    """The workload with ``factor`` times as many sessions (see the module docstring).

    ``factor`` 1 returns the requests unchanged; below 1 keeps a seeded subset of sessions.
    Requests without a session count as one-request sessions.
    """
    if not factor > 0:
        raise ValueError(f"factor: must be positive, got {factor!r}")
    sessions: dict[str, list[Request]] = {}
    for request in requests:
        sessions.setdefault(request.session or request.id, []).append(request)
    if factor == 1.0 or not sessions:
        return sorted(requests, key=lambda r: (r.arrival_s, r.id))
    names = sorted(sessions)
    owners: dict[int, int] = {}
    shared: set[int] = set()
    for index, name in enumerate(names):
        for request in sessions[name]:
            for block in request.block_hashes:
                owner = owners.setdefault(block, index)
                if owner != index:
                    shared.add(block)
    offset = max(owners, default=0) + 1
    starts = sorted(group[0].arrival_s for group in sessions.values())
    gap = (starts[-1] - starts[0]) / max(len(starts) - 1, 1)
    rng = np.random.default_rng(seed)
    copies = math.ceil(factor)
    scaled: list[Request] = []
    for copy in range(copies):
        order = rng.permutation(len(names))
        share = min(factor - copy, 1.0)
        keep = round(share * len(names))
        shifts = rng.uniform(0.0, gap, len(names)) if copy else np.zeros(len(names))
        for position in order[:keep]:
            name = names[int(position)]
            scaled.extend(_copy(sessions[name], copy, float(shifts[int(position)]), offset, shared))
    scaled.sort(key=lambda r: (r.arrival_s, r.id))
    return scaled


def _copy(
    group: list[Request], copy: int, shift: float, offset: int, shared: set[int]
) -> list[Request]:
    if copy == 0:
        return group
    suffix = f"#{copy}"
    return [
        replace(
            r,
            id=r.id + suffix,
            session=(r.session or r.id) + suffix,
            arrival_s=r.arrival_s + shift,
            block_hashes=tuple(b if b in shared else b + copy * offset for b in r.block_hashes),
        )
        for r in group
    ]


def find_capacity(
    run: Callable[[list[Request]], Sequence[SimulatedRequest]],
    requests: Sequence[Request],
    sla: SLA,
    cost_per_hour: float,
    *,
    iterations: int = 4,
    min_factor: float = 1 / 32,
    max_factor: float = 16.0,
    seed: int = 0,
) -> Capacity:
    """Search the highest session factor at which ``run`` meets ``sla`` (module docstring).

    ``run`` simulates one design on a list of requests and returns its records (the planner
    passes its own; ``pdd compare`` passes ``Scenario.run``). Same inputs, same answer.
    """
    probes: list[Probe] = []

    def probe(factor: float) -> bool:
        load = scale_sessions(requests, factor, seed=seed)
        window = sla_window(run(load), sla)
        probes.append(
            Probe(
                factor, offered_rps(load), len(load), window.met, window.violated, window.attainment
            )
        )
        return window.met

    good, bad = 0.0, math.inf
    factor = 1.0
    if probe(factor):
        good = factor
        while factor < max_factor:
            factor = min(factor * 2, max_factor)
            if not probe(factor):
                bad = factor
                break
            good = factor
    else:
        bad = factor
        while factor > min_factor:
            factor = max(factor / 2, min_factor)
            if probe(factor):
                good = factor
                break
            bad = factor
    bound = ""
    if math.isinf(bad):
        bound = "max_factor"
    elif good == 0.0:
        bound = "min_factor"
    else:
        for _ in range(iterations):
            middle = math.sqrt(good * bad)
            if probe(middle):
                good = middle
            else:
                bad = middle
    rate = next((p.offered_rps for p in probes if p.factor == good and p.met), 0.0)
    return Capacity(
        goodput_rps=rate,
        factor=good,
        cost_per_hour=cost_per_hour,
        bcr=rate / cost_per_hour if cost_per_hour > 0 else math.nan,
        bound=bound,
        probes=tuple(probes),
    )
