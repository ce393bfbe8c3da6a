"""Verify designs in the simulator, and fix a design the simulator says misses the SLA.

The analytic model ranks; the discrete-event simulator (``pdd_core.sim``) decides. A
verification runs the whole workload through the design with the design's routing table and
returns the simulator's ``Summary``. When it misses the SLA, ``fix_up`` reads the records of
the requests that missed TTFT and grows the pool behind most of their time (P's queue -> one
more P; MD/RLD admission -> one more of those; the WAN transfer -> a tighter transfer budget),
within the chip limits. Nothing is tuned: the next design is simulated again from scratch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pdd_core.planner.design import COLOCATED, PDD, Design, design_from_dict
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.routing import Pipeline
from pdd_core.sim import Summary, simulate
from pdd_core.sim.records import RequestRecord
from pdd_core.specs import Role, Topology


@dataclass(frozen=True, slots=True)
class Verification:
    """A design and what the simulator measured on it; ``cause`` is what slowed its misses."""

    design: Design
    summary: Summary
    cause: str

    def to_dict(self) -> dict[str, Any]:
        from pdd_core.planner.result import clean

        return {
            "design": self.design.to_dict(),
            "summary": clean(self.summary.to_dict()),
            "cause": self.cause,
        }


def verification_from_dict(raw: Mapping[str, Any]) -> Verification:
    """Inverse of ``Verification.to_dict`` (NaN may have become None in JSON)."""
    summary: dict[str, Any] = {k: (math.nan if v is None else v) for k, v in raw["summary"].items()}
    return Verification(design_from_dict(raw["design"]), Summary(**summary), str(raw["cause"]))


def topology_of(inputs: PlannerInputs, design: Design) -> Topology:
    """The design as a simulator topology; its shapes are checked (``ShapeError`` if not)."""
    topology = Topology(
        sites=inputs.sites,
        links=inputs.links,
        pools=tuple(p.spec(inputs.model.id) for p in design.pools),
        chips=dict(inputs.chips),
        models={inputs.model.id: inputs.model},
        rld_mode=design.rld_mode,
    )
    topology.check_shapes()
    return topology


def verify(
    inputs: PlannerInputs, design: Design, progress: Callable[[int], None] | None = None
) -> Verification:
    """Simulate ``design`` on the inputs' workload (deterministic for the config's seed)."""
    result = simulate(
        topology_of(inputs, design),
        design.policy,
        inputs.requests,
        model_id=inputs.model.id,
        sla=inputs.sla,
        table=design.table,
        config=inputs.config,
        prices=inputs.prices,
        progress=progress,
    )
    return Verification(design, result.summary, _cause(result.records, inputs, design))


def _cause(records: list[RequestRecord], inputs: PlannerInputs, design: Design) -> str:
    """Which part of TTFT dominates among the requests over the P90 target."""
    late = [r for r in records if not r.rejected and r.ttft_s > inputs.sla.ttft_p90_s]
    if not late:
        return "none"
    parts = {"queue": 0.0, "prefill": 0.0, "transfer": 0.0, "decode-wait": 0.0}
    relayed = 0
    for r in late:
        parts["queue"] += r.queue_s
        parts["prefill"] += r.prefill_s
        transfer = r.transfer_s if math.isfinite(r.transfer_s) else 0.0
        parts["transfer"] += transfer
        parts["decode-wait"] += max(0.0, r.ttft_s - r.queue_s - r.prefill_s - transfer)
        relayed += r.pipeline in (str(Pipeline.P_RLD_MD), str(Pipeline.P_RLD))
    cause = max(parts, key=lambda k: parts[k])
    if cause == "decode-wait" and design.policy == PDD and relayed * 2 > len(late):
        return "relay-wait"
    return cause


def fix_up(inputs: PlannerInputs, checked: Verification) -> Design | None:
    """The next design to simulate after ``checked`` missed the SLA, or None (give up).

    None when nothing local helps (or the limits forbid it): the caller then moves to the
    next-ranked design.
    """
    design, summary = checked.design, checked.summary
    if design.policy == COLOCATED:
        # Every instance serves both phases: any miss is fixed by one more instance.
        proposal = design.with_instances(Role.PREFILL, design.prefill.instances + 1)
    elif summary.tpot_p90 > inputs.sla.tpot_p90_s or summary.tpot_p99 > inputs.sla.tpot_p99_s:
        proposal = design.with_instances(Role.MAIN_DECODE, design.decode.instances + 1)
    elif checked.cause in ("queue", "prefill"):
        # A long prefill also waits for the chunks of the prefills ahead of it on its instance,
        # so one more P shortens "prefill" misses too, not only "queue" ones.
        proposal = design.with_instances(Role.PREFILL, design.prefill.instances + 1)
    elif checked.cause == "decode-wait":
        proposal = design.with_instances(Role.MAIN_DECODE, design.decode.instances + 1)
    elif checked.cause == "relay-wait" and design.relay is not None:
        proposal = design.with_instances(Role.RELAY_DECODE, design.relay.instances + 1)
    elif checked.cause == "relay-wait":
        # The relay shares P's instances; relayed requests also wait there for MD to take
        # them over, so grow whichever of P and MD the simulator found busier.
        busy = summary.utilisation
        if busy.get(str(Role.MAIN_DECODE), 0.0) >= busy.get(str(Role.PREFILL), 0.0):
            proposal = design.with_instances(Role.MAIN_DECODE, design.decode.instances + 1)
        else:
            proposal = design.with_instances(Role.PREFILL, design.prefill.instances + 1)
    elif checked.cause == "transfer" and design.policy == PDD:
        budget = design.table.transfer_budget_s / 2
        proposal = replace(design, table=replace(design.table, transfer_budget_s=budget))
    else:
        return None
    from pdd_core.planner.search import _fits

    return None if _fits(inputs, proposal) else proposal
