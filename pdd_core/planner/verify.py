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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pdd_core.planner.design import COLOCATED, PDD, Design, design_from_dict
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.routing import Pipeline
from pdd_core.sim import Summary, simulate
from pdd_core.sim.records import SimulatedRequest
from pdd_core.specs import SLA, Role, Topology
from pdd_core.workload import Request

# A TPOT miss whose late requests' longest gap is more than this many times their mean gap is
# a stall (a few long gaps: a preemption's recompute, a long prefill chunk or a handoff), not a
# decode step that is slow at every token.
STALL_RATIO = 4.0

TARGET_NAMES = {
    "ttft_p90": "TTFT P90",
    "ttft_p99": "TTFT P99",
    "tpot_p90": "TPOT P90",
    "tpot_p99": "TPOT P99",
}


@dataclass(frozen=True, slots=True)
class Verification:
    """A design and what the simulator measured on it: ``missed`` names the SLA targets it
    missed (``"ttft_p90"``, ``"tpot_p99"``, ...; worst first, empty when it met them all) and
    ``cause`` what slowed the requests behind the first of them (``_cause``)."""

    design: Design
    summary: Summary
    cause: str
    missed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from pdd_core.planner.result import clean

        return {
            "design": self.design.to_dict(),
            "summary": clean(self.summary.to_dict()),
            "cause": self.cause,
            "missed": list(self.missed),
        }

    def miss_text(self) -> str:
        """The misses in words: ``"TPOT P90 and TTFT P99 missed (decode-step)"``."""
        rejected = self.summary.rejected
        turned = f", {rejected} requests rejected" if rejected else ""
        if not self.missed:
            return f"no target missed{turned} (late requests: {self.cause})"
        names = " and ".join(TARGET_NAMES[m] for m in self.missed)
        return f"{names} missed{turned} ({self.cause})"


def verification_from_dict(raw: Mapping[str, Any]) -> Verification:
    """Inverse of ``Verification.to_dict`` (NaN may have become None in JSON)."""
    summary: dict[str, Any] = {k: (math.nan if v is None else v) for k, v in raw["summary"].items()}
    missed = tuple(str(m) for m in raw.get("missed", ()))
    return Verification(
        design_from_dict(raw["design"]), Summary(**summary), str(raw["cause"]), missed
    )


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


def design_runner(
    inputs: PlannerInputs, design: Design
) -> Callable[[list[Request]], Sequence[SimulatedRequest]]:
    """A function that simulates ``design`` on a list of requests with the inputs' model, SLA,
    engine config and prices, and returns the per-request results (what capacity searches
    run at each rate)."""
    topology = topology_of(inputs, design)

    def run(load: list[Request]) -> Sequence[SimulatedRequest]:
        return simulate(
            topology,
            design.policy,
            load,
            model_id=inputs.model.id,
            sla=inputs.sla,
            table=design.table,
            config=inputs.config,
            prices=inputs.prices,
        ).records

    return run


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
    missed = missed_targets(result.summary, inputs.sla)
    return Verification(
        design, result.summary, _cause(result.records, inputs, design, missed), missed
    )


def missed_targets(summary: Summary, sla: SLA) -> tuple[str, ...]:
    """The SLA targets ``summary`` misses, the worst (largest measured / target) first; a
    target with nothing measured (NaN) counts as missed by the most."""
    ratios = {
        "ttft_p90": summary.ttft_p90 / sla.ttft_p90_s,
        "ttft_p99": summary.ttft_p99 / sla.ttft_p99_s,
        "tpot_p90": summary.tpot_p90 / sla.tpot_p90_s,
        "tpot_p99": summary.tpot_p99 / sla.tpot_p99_s,
    }
    ratios = {name: math.inf if math.isnan(r) else r for name, r in ratios.items()}
    over = sorted((name for name, ratio in ratios.items() if ratio > 1.0), key=lambda n: -ratios[n])
    if not over and not summary.sla_met and summary.sla_violated in ratios:
        # The served requests meet every target; the judge, which counts each rejected request
        # as infinitely late (``metrics.window_sla``), does not: name the target it broke.
        over = [summary.sla_violated]
    return tuple(over)


def _cause(
    records: list[SimulatedRequest],
    inputs: PlannerInputs,
    design: Design,
    missed: tuple[str, ...] = (),
) -> str:
    """What slowed the requests behind the worst missed target: for TTFT, the part of TTFT that
    dominates among the requests over the P90 target (queue, prefill, transfer, decode-wait,
    relay-wait); for TPOT, whether the requests over the TPOT target decode slowly at every
    step (``decode-step``: the batch, its context or the prefill chunks sharing each iteration)
    or stall (``decode-stall``: a few long gaps, see ``STALL_RATIO``)."""
    if missed and missed[0].startswith("tpot"):
        return _tpot_cause(records, inputs.sla.tpot_p90_s)
    late = [r for r in records if not r.rejected and r.ttft_s > inputs.sla.ttft_p90_s]
    if not late:
        return _tpot_cause(records, inputs.sla.tpot_p90_s) if missed else "none"
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


def _tpot_cause(records: list[SimulatedRequest], target_s: float) -> str:
    slow = [
        r for r in records if not r.rejected and r.output_tokens > 1 and r.tpot_mean_s > target_s
    ]
    if not slow:
        return "none"
    stalled = sum(r.longest_stall_s > STALL_RATIO * r.tpot_mean_s for r in slow)
    return "decode-stall" if stalled * 2 > len(slow) else "decode-step"


def fix_up(inputs: PlannerInputs, checked: Verification) -> Design | None:
    """The next design to simulate after ``checked`` missed the SLA, or None (give up).

    None when nothing local helps (or the limits forbid it): the caller then moves to the
    next-ranked design.
    """
    design, summary = checked.design, checked.summary
    sla = inputs.sla
    worst = max(
        summary.ttft_p90 / sla.ttft_p90_s,
        summary.ttft_p99 / sla.ttft_p99_s,
        summary.tpot_p90 / sla.tpot_p90_s,
        summary.tpot_p99 / sla.tpot_p99_s,
    )

    def grown(role: Role) -> Design:
        # One instance near the edge; far from it (a target missed by half again or more) the
        # pool grows by half, so a badly undersized design is not walked up one by one.
        now = (design.pool(role) or design.prefill).instances
        step = 1 if not worst >= 1.5 else max(1, now // 2)
        return design.with_instances(role, now + step)

    if design.policy == COLOCATED:
        # Every instance serves both phases: any miss is fixed by more instances.
        proposal = grown(Role.PREFILL)
    elif summary.tpot_p90 > sla.tpot_p90_s or summary.tpot_p99 > sla.tpot_p99_s:
        proposal = grown(Role.MAIN_DECODE)
    elif checked.cause in ("queue", "prefill"):
        # A long prefill also waits for the chunks of the prefills ahead of it on its instance,
        # so more P shortens "prefill" misses too, not only "queue" ones.
        proposal = grown(Role.PREFILL)
    elif checked.cause == "decode-wait":
        proposal = grown(Role.MAIN_DECODE)
    elif checked.cause == "relay-wait" and design.relay is not None:
        proposal = grown(Role.RELAY_DECODE)
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

    return None if inputs.over_limit(proposal) else proposal
