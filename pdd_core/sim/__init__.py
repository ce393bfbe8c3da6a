"""Discrete-event simulator of a Topology serving a workload under a policy (PDD or a baseline).

``simulate(...)`` runs one policy and returns a ``SimResult`` (per-request records, the
``Summary`` aggregates and the WAN utilisation series); ``simulate_stream(...)`` folds the
records as they come instead (``stream.py``), for runs too long to keep them. See
``docs/simulator.md`` for the model and ``pdd_core.scenario`` for running the policies of a
scenario file side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pdd_core.routing import RoutingTable
from pdd_core.sim.config import POLICIES, Policy, SimConfig, policy_topology
from pdd_core.sim.engine import Simulator
from pdd_core.sim.records import SimulatedRequest
from pdd_core.sim.sinks import RecordFile, RecordSink, Tee
from pdd_core.sim.stream import DEFAULT_WINDOW_S, StreamingSummary, WindowSummary
from pdd_core.sim.summary import COMPARE_KEYS, Summary, summarize
from pdd_core.specs import SLA, PriceBook, Role, Topology
from pdd_core.workload import Request

__all__ = [
    "COMPARE_KEYS",
    "POLICIES",
    "Policy",
    "RecordFile",
    "RecordSink",
    "SimConfig",
    "SimResult",
    "SimulatedRequest",
    "Simulator",
    "StreamResult",
    "StreamingSummary",
    "Summary",
    "WindowSummary",
    "policy_topology",
    "simulate",
    "simulate_stream",
]

DEFAULT_PRICES = PriceBook(miss_input_per_mtok=2.0, hit_input_per_mtok=0.2, output_per_mtok=8.0)


@dataclass(frozen=True, slots=True)
class SimResult:
    """One run: the aggregates, every request's record, and WAN Gbps per time bin."""

    summary: Summary
    records: list[SimulatedRequest]
    wan_series: list[tuple[float, float]]


def simulate(
    topology: Topology,
    policy: Policy | str,
    requests: Iterable[Request],
    *,
    model_id: str,
    sla: SLA | None = None,
    table: RoutingTable | None = None,
    config: SimConfig | None = None,
    prices: PriceBook | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    """Run ``requests`` (sorted by arrival) through ``topology`` under ``policy``.

    The topology is used as given (derive a policy's own with ``policy_topology``); cost per
    hour is that topology's. The same inputs always give the same result.
    """
    policy, sla = Policy(policy), sla or SLA()
    sim = _simulator(topology, policy, model_id, sla, table, config, progress, None)
    records = sim.run(requests)
    totals = _totals(sim)
    summary = summarize(
        str(policy),
        records,
        sla=sla,
        prices=prices or DEFAULT_PRICES,
        cost_per_hour=topology.cost_per_hour(),
        **totals.keywords(),
    )
    return SimResult(summary=summary, records=records, wan_series=totals.wan_series)


@dataclass(frozen=True, slots=True)
class StreamResult:
    """One streamed run: the aggregates, per-window figures and WAN Gbps per time bin (no
    per-request records: those went to the sink, ``simulate_stream``'s ``records``)."""

    summary: Summary
    windows: list[WindowSummary]
    wan_series: list[tuple[float, float]]


def simulate_stream(
    topology: Topology,
    policy: Policy | str,
    requests: Iterable[Request],
    *,
    model_id: str,
    sla: SLA | None = None,
    table: RoutingTable | None = None,
    config: SimConfig | None = None,
    prices: PriceBook | None = None,
    progress: Callable[[int], None] | None = None,
    window_s: float = DEFAULT_WINDOW_S,
    records: RecordSink | None = None,
) -> StreamResult:
    """``simulate`` for a long run: each record is folded into a ``StreamingSummary`` as its
    request ends (and passed to ``records`` too, e.g. a ``RecordFile``), none is kept.

    Give ``requests`` as a ``SessionStream`` (``pdd_core.workload.stream_agentic``) and the
    workload is not held either. The summary is ``summarize``'s with sketched percentiles
    (``pdd_core.sim.stream``); the simulation itself is the same.
    """
    policy, sla = Policy(policy), sla or SLA()
    folded = StreamingSummary(sla, window_s=window_s)
    sink = folded if records is None else Tee(folded, records)
    sim = _simulator(topology, policy, model_id, sla, table, config, progress, sink)
    sim.run(requests)
    totals = _totals(sim)
    summary = folded.summary(
        str(policy),
        prices=prices or DEFAULT_PRICES,
        cost_per_hour=topology.cost_per_hour(),
        **totals.keywords(),
    )
    return StreamResult(summary=summary, windows=folded.windows(), wan_series=totals.wan_series)


def _simulator(  # noqa: PLR0917 - the two entry points' own arguments, passed through
    topology: Topology,
    policy: Policy,
    model_id: str,
    sla: SLA,
    table: RoutingTable | None,
    config: SimConfig | None,
    progress: Callable[[int], None] | None,
    sink: RecordSink | None,
) -> Simulator:
    return Simulator(
        topology,
        policy,
        model_id=model_id,
        sla=sla,
        table=table or RoutingTable(),
        config=config or SimConfig(),
        progress=progress,
        sink=sink,
    )


@dataclass(frozen=True, slots=True)
class _Totals:
    """What a finished simulator knows beyond its records: busy time per role and the WAN's."""

    busy: dict[str, tuple[float, int]]
    wan_series: list[tuple[float, float]]
    wan_busy_s: float
    wan_cancelled: int
    preemptions: int

    def keywords(self) -> dict[str, Any]:
        """What both summaries (``summarize``, ``StreamingSummary.summary``) take of it."""
        return {
            "busy": self.busy,
            "wan_series": self.wan_series,
            "wan_busy_s": self.wan_busy_s,
            "wan_cancelled": self.wan_cancelled,
            "preemptions": self.preemptions,
        }


def _totals(sim: Simulator) -> _Totals:
    busy: dict[str, tuple[float, int]] = {}
    groups = (
        ("colocated", sim.prefill)
        if sim.policy is Policy.COLOCATED
        else (str(Role.PREFILL), sim.prefill),
        # RLD time-shared on P (``rld_mode``) has no instances of its own to count.
        (str(Role.RELAY_DECODE), [] if sim.relay is sim.prefill else sim.relay),
        (str(Role.MAIN_DECODE), sim.decode),
    )
    for role, instances in groups:
        if instances:
            busy[role] = (sum(i.busy_s for i in instances), len(instances))
    every = list({id(i): i for i in (*sim.prefill, *sim.relay, *sim.decode)}.values())
    return _Totals(
        busy=busy,
        wan_series=sim.wan.gbps_series() if sim.wan is not None else [],
        wan_busy_s=sim.wan.busy_s if sim.wan is not None else 0.0,
        wan_cancelled=sim.wan.cancelled if sim.wan is not None else 0,
        preemptions=sum(i.preemptions for i in every),
    )
