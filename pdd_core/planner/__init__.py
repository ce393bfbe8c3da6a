"""The planner: P:RLD:MD sizing per site and chip, routing thresholds, bathtub and reasons.

DOMAIN.md section 6 asks: for this workload, these sites, chips and links, how many P, RLD and MD
instances of which chip go where, and which thresholds should the router use, so that the SLA
holds at the lowest cost? The answer is computed in two steps (``docs/planner.md``):

1. a fast analytic capacity model (``capacity``, ``stages``) searches the space - chip and tp per
   role, counts within the per-site limits, the transfer budget and the singular threshold
   (``search``);
2. the discrete-event simulator verifies the best few designs (``verify``), fixing a design up
   one instance at a time where the simulator says it misses the SLA.

The result is a ``Plan`` (pools, routing table, simulated predictions, the best homogeneous
same-dc baseline verified the same way, the bathtub curve, reasons) or an ``Infeasible``
explanation. Everything is deterministic for the scenario's seed.
"""

from pdd_core.planner.bathtub import Bathtub, BathtubPoint, bathtub, hit_grid
from pdd_core.planner.design import Design, PoolChoice, design_from_dict
from pdd_core.planner.from_scenario import inputs_from_scenario
from pdd_core.planner.improve import confirmed
from pdd_core.planner.inputs import CandidateChip, PlannerInputs, PlannerSettings
from pdd_core.planner.profile import WorkloadProfile, profile_from_requests
from pdd_core.planner.result import Infeasible, Plan, PlanOutcome, PoolPlan
from pdd_core.planner.run import (
    Prepared,
    finish,
    first_round,
    make_plan,
    prepare,
)
from pdd_core.planner.verify import Verification, verification_from_dict, verify

__all__ = [
    "Bathtub",
    "BathtubPoint",
    "CandidateChip",
    "Design",
    "Infeasible",
    "Plan",
    "PlanOutcome",
    "PlannerInputs",
    "PlannerSettings",
    "PoolChoice",
    "PoolPlan",
    "Prepared",
    "Verification",
    "WorkloadProfile",
    "bathtub",
    "confirmed",
    "design_from_dict",
    "finish",
    "first_round",
    "hit_grid",
    "inputs_from_scenario",
    "make_plan",
    "prepare",
    "profile_from_requests",
    "verification_from_dict",
    "verify",
]
