"""Capacity as a measured statistic: over independent workloads, with a 95% interval.

``sim.capacity.find_capacity`` bisects one workload's verdict; near the SLA's edge one seed's
verdict flips with the noise of its queues, so a capacity found that way moves by a bisection
step between runs for no physical reason. ``measure_capacity`` judges the SLA over the requests
of several independent workloads at once (more requests, smoother tails), searches the rate to a
stated resolution, and reports a bootstrap interval over the workloads. Independent workloads
are, for a generated workload, the generator at independent seeds; for a fixed public trace,
disjoint windows of equal duration (``trace_windows``). ``paired_ratio`` compares two designs
measured over the same workloads, replicate by replicate (common random numbers).

The rate of a load is the rate its judged requests arrived at in the run
(``sim.capacity.arrived_rps``): the offered rate of an open-loop replay, the achieved rate of
closed-loop sessions (a turn arrives after its predecessor's answer plus think time, so a
slower design is offered less by the same sessions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from pdd_core.sim.capacity import arrived_rps, scale_sessions
from pdd_core.sim.records import SimulatedRequest
from pdd_core.specs import SLA
from pdd_core.workload import Request

# ---- capacity as a measured statistic ------------------------------------------------------

# Geometric step of the bracketing search, and bootstrap replicates of the interval.
BRACKET_STEP = 1.25
BOOTSTRAP_REPLICATES = 400
# One fixed stream for the resampling: replicate i draws the same workloads for every design,
# so ratios between designs are paired (common random numbers).
BOOTSTRAP_SEED = 20_251_201


@dataclass(frozen=True, slots=True)
class PooledProbe:
    """One load: the session factor, the mean rate over the workloads (``arrived_rps``: offered
    open loop, achieved closed loop), and the SLA verdict over all their requests together
    (``per_seed``: each workload's own verdict)."""

    factor: float
    offered_rps: float
    met: bool
    violated: str
    per_seed: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class MeasuredCapacity:
    """Capacity over independent workloads, with a 95% interval (``measure_capacity``).

    ``goodput_rps`` is the highest mean rate (``arrived_rps``) over the probed factors up to
    ``factor``, the highest probed factor at which the SLA held over every workload's requests
    pooled and at every probed factor below it;
    ``low_rps``/``high_rps`` bound it (bootstrap over workloads); ``replicates`` are the
    bootstrap capacities in req/s, replicate i drawn from the same workloads for every design
    (``paired_ratio``). ``simulations`` counts simulator runs.
    """

    goodput_rps: float
    factor: float
    low_rps: float
    high_rps: float
    seeds: int
    resolution: float
    cost_per_hour: float
    bound: str
    probes: tuple[PooledProbe, ...]
    replicates: tuple[float, ...]
    simulations: int

    @property
    def bcr(self) -> float:
        return self.goodput_rps / self.cost_per_hour if self.cost_per_hour > 0 else math.nan

    def to_dict(self) -> dict[str, object]:
        return {
            "goodput_rps": self.goodput_rps,
            "low_rps": self.low_rps,
            "high_rps": self.high_rps,
            "factor": self.factor,
            "seeds": self.seeds,
            "resolution": self.resolution,
            "cost_per_hour": self.cost_per_hour,
            "bcr": self.bcr,
            "bound": self.bound,
            "simulations": self.simulations,
            "probes": [
                {"factor": p.factor, "offered_rps": p.offered_rps, "met": p.met}
                for p in self.probes
            ],
        }


@dataclass(frozen=True, slots=True)
class _Sample:
    """One workload's figures at one load: served TTFT and TPOT (sorted) and its misses."""

    ttft: np.ndarray
    tpot: np.ndarray
    misses: int
    offered_rps: float


def _sample(records: Sequence[SimulatedRequest], judged: set[str] | None = None) -> _Sample:
    """A workload's figures at one load over its ``judged`` requests (by id, a copy judged as
    its original; None: all); the others only warm the caches. The rate is theirs as simulated
    (``arrived_rps``)."""
    if judged is not None:
        records = [r for r in records if r.id.split("#")[0] in judged]
    served = [r for r in records if not r.rejected]
    ttft = np.array([r.ttft_s for r in served], dtype=float)
    tpot = np.array([r.tpot_mean_s for r in served], dtype=float)
    bad = np.isnan(ttft) | np.isnan(tpot)
    misses = len(records) - len(served) + int(bad.sum())
    return _Sample(np.sort(ttft[~bad]), np.sort(tpot[~bad]), misses, arrived_rps(records))


def _weighted_percentile(values: np.ndarray, counts: np.ndarray, misses: int, q: float) -> float:
    """``metrics``' percentile with misses as +inf, over sorted ``values`` each repeated
    ``counts`` times (a bootstrap multiset without building it)."""
    cum = np.cumsum(counts)
    finite = int(cum[-1]) if cum.size else 0
    n = finite + misses
    if n == 0:
        return math.nan
    position = q / 100.0 * (n - 1)
    low, high = math.floor(position), math.ceil(position)
    if high >= finite:
        return math.inf
    v_low = float(values[int(np.searchsorted(cum, low + 1))])
    v_high = float(values[int(np.searchsorted(cum, high + 1))])
    return v_low + (v_high - v_low) * (position - low)


def pooled_verdict(samples: Sequence[_Sample], weights: Sequence[int], sla: SLA) -> str:
    """The SLA over every sample's requests pooled, sample i counted ``weights[i]`` times:
    "" when met, else the first target missed (the order of ``metrics.window_sla``)."""
    used = [(s, w) for s, w in zip(samples, weights, strict=True) if w > 0]
    if not used or all(s.ttft.size + s.misses == 0 for s, _ in used):
        return "no requests"
    misses = sum(s.misses * w for s, w in used)
    checks = []
    for column, p90, p99 in (
        ("ttft", sla.ttft_p90_s, sla.ttft_p99_s),
        ("tpot", sla.tpot_p90_s, sla.tpot_p99_s),
    ):
        values = np.concatenate([getattr(s, column) for s, _ in used])
        counts = np.concatenate([np.full(getattr(s, column).size, w) for s, w in used])
        order = np.argsort(values, kind="stable")
        values, counts = values[order], counts[order]
        checks.append((f"{column}_p90", _weighted_percentile(values, counts, misses, 90.0), p90))
        checks.append((f"{column}_p99", _weighted_percentile(values, counts, misses, 99.0), p99))
    for name, value, target in checks:
        if not value <= target:
            return name
    return ""


@dataclass(frozen=True, slots=True)
class Window:
    """One independent workload: ``requests`` (shifted to start at 0), of which those arriving
    from ``judged_from`` seconds on are judged; the earlier ones (the end of the previous
    window of a trace) are replayed only so caches and queues are not cold at the edge."""

    requests: list[Request]
    judged_from: float


def trace_windows(requests: Sequence[Request], count: int, warmup: float = 0.5) -> list[Window]:
    """``count`` disjoint judged windows of equal duration (the independent workloads of a
    fixed trace), each preceded by ``warmup`` of a window's duration of the trace before it.

    A public trace has one realisation; resampling its requests would break the prefix reuse
    between a conversation's turns. Windows keep it (the warm-up replays the turns just before
    a window, so its caches hold what the whole trace's would), and each keeps the trace's own
    rate and mix; the judged windows are disjoint, so together they judge every request once.
    """
    if count < 1:
        raise ValueError(f"count: must be at least 1, got {count!r}")
    if not 0.0 <= warmup <= 1.0:
        raise ValueError(f"warmup: must be within [0, 1], got {warmup!r}")
    ordered = sorted(requests, key=lambda r: (r.arrival_s, r.id))
    if not ordered:
        return [Window([], 0.0) for _ in range(count)]
    start, end = ordered[0].arrival_s, ordered[-1].arrival_s
    width = (end - start) / count or 1.0
    windows = []
    for index in range(count):
        begin = start + index * width
        stop = start + (index + 1) * width if index < count - 1 else math.inf
        origin = max(start, begin - warmup * width)
        chosen = [r for r in ordered if origin <= r.arrival_s < stop]
        shifted = [replace(r, arrival_s=r.arrival_s - origin) for r in chosen]
        windows.append(Window(shifted, begin - origin))
    return windows


def measure_capacity(
    run: Callable[[list[Request]], Sequence[SimulatedRequest]],
    workloads: Sequence[Sequence[Request]],
    sla: SLA,
    cost_per_hour: float,
    *,
    judged_from: Sequence[float] = (),
    resolution: float = 0.02,
    min_factor: float = 1 / 32,
    max_factor: float = 16.0,
    seed: int = 0,
) -> MeasuredCapacity:
    """Capacity of one design over independent ``workloads`` (module docstring, measured).

    At each session factor every workload is scaled (``at_factor``) and simulated; the
    SLA is judged over all their requests together. From factor 1 the factor is multiplied (or
    divided) by ``BRACKET_STEP`` until the verdict flips, then bisected geometrically until the
    bracket is within ``resolution``. Capacity is monotone in load by construction: it is the
    highest probed factor at which the pooled SLA held *and held at every probed factor below
    it*, and so is every bootstrap replicate (``BOOTSTRAP_REPLICATES`` resamples of the
    workloads with replacement, judged on the same simulations: no extra runs).
    """
    if not workloads:
        raise ValueError("workloads: need at least one")
    starts = list(judged_from) or [0.0] * len(workloads)
    ids = [{r.id for r in w if r.arrival_s >= b} for w, b in zip(workloads, starts, strict=True)]
    samples: dict[float, list[_Sample]] = {}

    def probe(factor: float) -> bool:
        if factor not in samples:
            row = []
            for workload, judged in zip(workloads, ids, strict=True):
                load = at_factor(workload, factor, seed=seed)
                row.append(_sample(run(load), judged))
            samples[factor] = row
        return pooled_verdict(samples[factor], [1] * len(workloads), sla) == ""

    good, bad = _bracket(probe, min_factor, max_factor)
    bound = "max_factor" if math.isinf(bad) else "min_factor" if good == 0.0 else ""
    if not bound:
        while bad / good > 1.0 + resolution:
            middle = math.sqrt(good * bad)
            if probe(middle):
                good = middle
            else:
                bad = middle
    k = len(workloads)
    if not bound:
        _extend_tails(samples, probe, sla, min_factor, max_factor)
    factors = sorted(samples)
    counts = np.random.default_rng(BOOTSTRAP_SEED).multinomial(
        k, [1.0 / k] * k, size=BOOTSTRAP_REPLICATES
    )
    replicates = tuple(_replicate(samples, factors, list(w), sla)[0] for w in counts)
    point, at = _replicate(samples, factors, [1] * k, sla)
    low, high = (float(np.percentile(replicates, q)) for q in (2.5, 97.5))
    probes = tuple(
        PooledProbe(
            f,
            float(np.mean([s.offered_rps for s in samples[f]])),
            pooled_verdict(samples[f], [1] * k, sla) == "",
            pooled_verdict(samples[f], [1] * k, sla),
            tuple(pooled_verdict([s], [1], sla) == "" for s in samples[f]),
        )
        for f in factors
    )
    return MeasuredCapacity(
        goodput_rps=point,
        factor=at,
        low_rps=low,
        high_rps=high,
        seeds=k,
        resolution=resolution,
        cost_per_hour=cost_per_hour,
        bound=bound,
        probes=probes,
        replicates=replicates,
        simulations=len(factors) * k,
    )


def at_factor(requests: Sequence[Request], factor: float, *, seed: int = 0) -> list[Request]:
    """The workload at ``factor`` times its load. Above 1, more sessions (``scale_sessions``:
    copies of sessions, the originals kept). Below 1, the *same* sessions with their starts
    spread out by ``1 / factor`` (think times inside a session kept), so a lower load judges
    the same requests as the workload itself rather than a smaller sample of them, whose P99
    would sit nearer its maximum and make a lower load look worse."""
    if factor >= 1.0:
        return scale_sessions(requests, factor, seed=seed)
    if not factor > 0:
        raise ValueError(f"factor: must be positive, got {factor!r}")
    starts: dict[str, float] = {}
    for r in requests:
        key = r.session or r.id
        starts[key] = min(starts.get(key, r.arrival_s), r.arrival_s)
    origin = min(starts.values(), default=0.0)
    stretch = 1.0 / factor - 1.0
    spread = [
        replace(r, arrival_s=r.arrival_s + (starts[r.session or r.id] - origin) * stretch)
        for r in requests
    ]
    return sorted(spread, key=lambda r: (r.arrival_s, r.id))


def _extend_tails(
    samples: Mapping[float, Sequence[_Sample]],
    probe: Callable[[float], bool],
    sla: SLA,
    min_factor: float,
    max_factor: float,
) -> None:
    """Probe below the lowest factor until every workload alone meets the SLA there, and above
    the highest until every one alone misses it, so that every bootstrap replicate's boundary
    lies inside the probed range (a mixture of workloads that each meet a percentile target
    meets it too). The interval's resolution in its tails is ``BRACKET_STEP``."""
    low = min(samples)
    while low > min_factor and not all(pooled_verdict([s], [1], sla) == "" for s in samples[low]):
        low = max(low / BRACKET_STEP, min_factor)
        probe(low)
    high = max(samples)
    while high < max_factor and any(pooled_verdict([s], [1], sla) == "" for s in samples[high]):
        high = min(high * BRACKET_STEP, max_factor)
        probe(high)


def _bracket(
    probe: Callable[[float], bool], min_factor: float, max_factor: float
) -> tuple[float, float]:
    """(highest factor met, lowest factor missed) by ``BRACKET_STEP`` steps from factor 1."""
    factor = 1.0
    if probe(factor):
        good = factor
        while good < max_factor:
            factor = min(good * BRACKET_STEP, max_factor)
            if not probe(factor):
                return good, factor
            good = factor
        return good, math.inf
    bad = factor
    while bad > min_factor:
        factor = max(bad / BRACKET_STEP, min_factor)
        if probe(factor):
            return factor, bad
        bad = factor
    return 0.0, bad


def _replicate(
    samples: Mapping[float, Sequence[_Sample]],
    factors: Sequence[float],
    weights: list[int],
    sla: SLA,
) -> tuple[float, float]:
    """(capacity in req/s, its factor) of one weighting of the workloads: the highest rate
    over the probed factors up to the highest one met with every lower probed factor met too
    (0 when the lowest misses). Taking the highest rate of that prefix, not the last one, keeps
    capacity monotone when closed-loop sessions arrive a little slower at a higher factor."""
    rate, at = 0.0, 0.0
    total = sum(weights)
    for f in factors:
        if pooled_verdict(samples[f], weights, sla):
            break
        here = sum(s.offered_rps * w for s, w in zip(samples[f], weights, strict=True)) / total
        rate = max(rate, here)
        at = f
    return rate, at


def paired_ratio(mine: MeasuredCapacity, other: MeasuredCapacity) -> tuple[float, float, float]:
    """BCR of ``mine`` over ``other`` (capacity per $/h), and its 95% interval from the paired
    bootstrap replicates (both measured over the same workloads: replicate i of each drew the
    same ones), so the noise the two share cancels in the ratio."""
    point = _ratio(mine.goodput_rps, mine.cost_per_hour, other.goodput_rps, other.cost_per_hour)
    pairs = [
        _ratio(a, mine.cost_per_hour, b, other.cost_per_hour)
        for a, b in zip(mine.replicates, other.replicates, strict=True)
    ]
    finite = [r for r in pairs if math.isfinite(r)]
    if not finite:
        return point, math.nan, math.nan
    return point, float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))


def _ratio(a: float, cost_a: float, b: float, cost_b: float) -> float:
    if b <= 0 or cost_a <= 0 or cost_b <= 0:
        return math.inf if a > 0 else math.nan
    return (a / cost_a) / (b / cost_b)
