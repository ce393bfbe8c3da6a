"""The simulated search: each family's cheapest design that meets the SLA, on one budget.

A design is *confirmed* when the simulator meets every SLA percentile and rejects (429) at most
1% of the requests. Every family (PDD, homogeneous and heterogeneous same-dc, aggregated) is
searched by the same ``propose`` over its analytic front (``planner.front``: shapes x counts x
chunk budgets, cost-ordered) with the same number of simulations:

1. *No design confirmed yet*: the latest failure's directed fix-up (``verify.fix_up``: one more
   instance of the role behind its misses), unless that shape stalled; else the cheapest front
   member the analytic model accepts; else the member with the widest analytic margin.
2. *A design confirmed at cost C*: among the members cheaper than C, the cheapest the analytic
   model accepts; when it accepts none, the one with the widest analytic margin (ties: the
   cheaper). These are re-splits of fewer chips between P and D, other shapes and other chunk
   budgets, not only one instance less; each confirmation lowers C and each failure prunes, so
   the search descends node by node. Cheapest-accepted first, rather than widest margin first,
   keeps the budget from going to designs barely cheaper than C: a larger inventory adds such
   designs (deeper shapes, more instances), and with margin first they took the simulations
   that found the cheaper design on the smaller inventory. In either step, a member whose
   chips and counts already failed under another chunk budget waits behind members whose
   hardware has not.

A failure *prunes* what it proves cannot pass, using the property that adding an instance never
lowers capacity (tested in ``tests/pdd_core/planner/test_search_properties.py``): every design
of the same shapes with no more instances in any role. With open-loop arrivals also: when TPOT
held and the misses were P's (queue or prefill), every design with the same P pool or a smaller
one of it, whatever its D; when only TPOT missed, every design with the same D pool or a smaller
one, whatever its P. Closed-loop sessions (the default for agentic workloads) void those two: a
turn arrives after its predecessor's answer, so D paces P's arrivals and P paces D's (on the
reference, P 1 x tp8xpp4 missed TTFT P90 beside MD 2 x tp4xpp6 and meets the SLA beside the
slower MD 1 x tp4xpp8, $51.2/h, which the cross-role prune had hidden). A shape whose fix-up did
not shorten TTFT P99 by 5% is service-bound and pruned whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from pdd_core.planner.design import COLOCATED, Design, PoolChoice
from pdd_core.planner.front import Member
from pdd_core.planner.inputs import PlannerInputs
from pdd_core.planner.search import shape_key
from pdd_core.planner.verify import Verification, fix_up, verify
from pdd_core.specs import SLA, ChipSpec

Progress = Callable[[float, str], None]

# A verified design must also serve (not reject with 429) all but this share of requests.
MAX_REJECTED_SHARE = 0.01
# P-side misses: the causes ``verify`` names when a request's own prefill or P's queue dominates.
PREFILL_CAUSES = frozenset({"queue", "prefill"})


def confirmed(verification: Verification) -> bool:
    """The simulator met every SLA percentile and rejected at most 1% of the requests."""
    s = verification.summary
    return bool(s.sla_met and s.rejected <= MAX_REJECTED_SHARE * max(s.requests, 1))


def best_confirmed(checked: Sequence[Verification], family: str) -> Verification | None:
    """The cheapest design of ``family`` the simulator confirmed (then the higher BCR)."""
    good = [v for v in checked if v.design.family == family and confirmed(v)]
    return min(good, key=lambda v: (v.summary.cost_per_hour, -v.summary.bcr), default=None)


def _same_pool(a: PoolChoice, b: PoolChoice) -> bool:
    return (a.site, a.chip, a.shape) == (b.site, b.chip, b.shape)


def _misses(v: Verification, sla: SLA) -> tuple[bool, bool]:
    """(TTFT missed, TPOT missed) in the simulator."""
    s = v.summary
    ttft = not (s.ttft_p90 <= sla.ttft_p90_s and s.ttft_p99 <= sla.ttft_p99_s)
    tpot = not (s.tpot_p90 <= sla.tpot_p90_s and s.tpot_p99 <= sla.tpot_p99_s)
    return ttft, tpot


def prunes(failed: Verification, design: Design, sla: SLA, *, closed_loop: bool = False) -> bool:
    """Whether ``failed`` proves ``design`` misses too (module docstring). With closed-loop
    sessions only the first rule holds: there a turn arrives after its predecessor's answer,
    so the decode pool sets how fast P is offered work (and P how fast D is), and a P that
    missed beside one decode pool may meet the SLA beside a slower one."""
    f = failed.design
    if f.family != design.family:
        return False
    if shape_key(f) == shape_key(design) and all(
        p.instances <= q.instances for p, q in zip(design.pools, f.pools, strict=True)
    ):
        return True
    if closed_loop:
        return False
    if f.policy == COLOCATED or f.rld_mode != design.rld_mode or f.table != design.table:
        return False
    ttft, tpot = _misses(failed, sla)
    if ttft and not tpot and failed.cause in PREFILL_CAUSES:
        return _same_pool(f.prefill, design.prefill) and (
            design.prefill.instances <= f.prefill.instances
        )
    if tpot and not ttft:
        return _same_pool(f.decode, design.decode) and design.decode.instances <= f.decode.instances
    return False


def stalled_shapes(checked: Sequence[Verification]) -> set[tuple[object, ...]]:
    """Shapes whose last fix-up did not shorten the simulated TTFT P99 by 5%: their requests
    miss on service time, which more instances of the same shape do not buy back."""
    last: dict[tuple[object, ...], float] = {}
    stalled: set[tuple[object, ...]] = set()
    for v in checked:
        key = shape_key(v.design)
        if key in last and v.summary.ttft_p99 > 0.95 * last[key]:
            stalled.add(key)
        last[key] = v.summary.ttft_p99
    return stalled


def propose(
    inputs: PlannerInputs,
    front: Sequence[Member],
    checked: Sequence[Verification],
    family: str,
    chips: Mapping[str, ChipSpec],
) -> Design | None:
    """The next design of ``family`` to simulate after ``checked`` (module docstring), or None
    when nothing cheaper than the family's best can still pass. Deterministic."""
    mine = [v for v in checked if v.design.family == family]
    tried = {v.design for v in checked}
    best = best_confirmed(mine, family)
    ceiling = best.design.cost(chips) if best is not None else float("inf")
    failures = [v for v in mine if not confirmed(v)]
    stalled = stalled_shapes(mine)
    closed = inputs.config.closed_loop

    def open_(design: Design) -> bool:
        return (
            design not in tried
            and design.cost(chips) < ceiling - 1e-9
            and shape_key(design) not in stalled
            and not any(prunes(f, design, inputs.sla, closed_loop=closed) for f in failures)
            and inputs.over_limit(design) is None
        )

    # Hardware already failed (another chunk budget of the same chips) waits behind hardware
    # not yet tried: a chunk budget rarely rescues what those chips could not serve.
    failed = Counter(_hardware(f.design) for f in failures)
    members = sorted(
        (m for m in front if open_(m.design)), key=lambda m: failed[_hardware(m.design)]
    )  # stable: cost order within each count
    accepted = [m for m in members if m.evaluation.meets_sla]

    def widest() -> Design | None:
        top = max(members, key=lambda m: (-failed[_hardware(m.design)], *_promise(m)), default=None)
        return top.design if top is not None else None

    if best is not None:
        return accepted[0].design if accepted else widest()
    if failures:
        fixed = fix_up(inputs, failures[-1])
        if fixed is not None and open_(fixed):
            return fixed
    return accepted[0].design if accepted else widest()


def _hardware(design: Design) -> tuple[object, ...]:
    """A design's chips and counts, without its chunk budgets and routing table."""
    return tuple((p.role, p.site, p.chip, p.shape, p.instances) for p in design.pools)


def _promise(member: Member) -> tuple[float, float, str]:
    # Widest analytic margin first; then the cheaper; then a fixed order.
    return (member.margin, -member.evaluation.cost_per_hour, member.design.label())


def improve(
    inputs: PlannerInputs,
    *,
    front: Sequence[Member],
    chips: Mapping[str, ChipSpec],
    checked: list[Verification],
    family: str,
    budget: int,
    report: Progress,
) -> None:
    """Simulate ``propose``'s designs until the family has spent ``budget`` simulations or
    nothing cheaper than its best can pass. Appends to ``checked``."""
    runs = sum(1 for v in checked if v.design.family == family)
    while runs < budget:
        proposal = propose(inputs, front, checked, family, chips)
        if proposal is None:
            return
        report(0.2 + 0.6 * min(runs / max(budget, 1), 1.0), f"simulating {proposal.label()}")
        checked.append(verify(inputs, proposal))
        runs += 1
