"""Discrete-event simulator of a Topology serving a workload under a policy (PDD or a baseline).

``simulate(...)`` runs one policy and returns a ``SimResult`` (per-request records, the
``Summary`` aggregates and the WAN utilisation series). See ``docs/simulator.md`` for the model
and ``pdd_core.scenario`` for running the policies of a scenario file side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pdd_core.routing import RoutingTable
from pdd_core.sim.config import POLICIES, Policy, SimConfig, policy_topology
from pdd_core.sim.engine import Simulator
from pdd_core.sim.records import RequestRecord
from pdd_core.sim.summary import COMPARE_KEYS, Summary, summarize
from pdd_core.specs import SLA, PriceBook, Role, Topology
from pdd_core.workload import Request

__all__ = [
    "COMPARE_KEYS",
    "POLICIES",
    "Policy",
    "RequestRecord",
    "SimConfig",
    "SimResult",
    "Simulator",
    "Summary",
    "policy_topology",
    "simulate",
]

DEFAULT_PRICES = PriceBook(miss_input_per_mtok=2.0, hit_input_per_mtok=0.2, output_per_mtok=8.0)


@dataclass(frozen=True, slots=True)
class SimResult:
    """One run: the aggregates, every request's record, and WAN Gbps per time bin."""

    summary: Summary
    records: list[RequestRecord]
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
    policy = Policy(policy)
    sla = sla or SLA()
    sim = Simulator(
        topology,
        policy,
        model_id=model_id,
        sla=sla,
        table=table or RoutingTable(),
        config=config or SimConfig(),
        progress=progress,
    )
    records = sim.run(requests)
    busy: dict[str, tuple[float, int]] = {}
    groups = (
        ("colocated", sim.prefill)
        if policy is Policy.COLOCATED
        else (str(Role.PREFILL), sim.prefill),
        # RLD time-shared on P (``rld_mode``) has no instances of its own to count.
        (str(Role.RELAY_DECODE), [] if sim.relay is sim.prefill else sim.relay),
        (str(Role.MAIN_DECODE), sim.decode),
    )
    for role, instances in groups:
        if instances:
            busy[role] = (sum(i.busy_s for i in instances), len(instances))
    series = sim.wan.gbps_series() if sim.wan is not None else []
    every = list({id(i): i for i in (*sim.prefill, *sim.relay, *sim.decode)}.values())
    summary = summarize(
        str(policy),
        records,
        sla=sla,
        prices=prices or DEFAULT_PRICES,
        cost_per_hour=topology.cost_per_hour(),
        busy=busy,
        wan_series=series,
        wan_busy_s=sim.wan.busy_s if sim.wan is not None else 0.0,
        wan_cancelled=sim.wan.cancelled if sim.wan is not None else 0,
        preemptions=sum(i.preemptions for i in every),
    )
    return SimResult(summary=summary, records=records, wan_series=series)
