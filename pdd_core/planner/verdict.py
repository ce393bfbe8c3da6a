""" "Does PDD pay here?": the plan's answer in numbers, and the relay-mode choice.

The planner sizes and verifies the best design of each family (PDD, homogeneous disaggregated
``same-dc``, aggregated ``colocated``) under the same shape, chip and SLA rules; the cheapest one
the simulator confirms is recommended. This module turns those confirmed designs into sentences an
operator can act on: which family wins, by how much, and why, from per-role costs and the analytic
model's unit costs (dollars per prefilled request, per thousand decoded tokens), never adjectives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pdd_core.planner.capacity import Evaluator
from pdd_core.planner.design import COLOCATED, PDD, SAME_DC, Design, PoolChoice
from pdd_core.planner.search import Scored
from pdd_core.planner.verify import Verification
from pdd_core.specs import RldMode

FAMILIES: tuple[str, ...] = (PDD, SAME_DC, COLOCATED)
NAMES = {PDD: "PDD", SAME_DC: "homogeneous disaggregated (same-dc)", COLOCATED: "aggregated"}


def _decode_cost_per_ktok(ev: Evaluator, pool: PoolChoice, drc: bool) -> float:
    """Dollars per 1000 output tokens of one instance of ``pool`` running at its batch."""
    batch, step, _ = ev.decode_batch(pool.chip, pool.shape, drc=drc)
    if not batch or not math.isfinite(step):
        return math.inf
    one = PoolChoice(pool.site, pool.chip, pool.role, 1, pool.tp, pool.pp, pool.dp, pool.ep)
    per_chip_hour = ev.chips[pool.chip].price_per_hour * one.shape.chips
    return per_chip_hour / (batch / step * 3600) * 1000


def _prefill_cost_per_request(ev: Evaluator, pool: PoolChoice) -> float:
    """Dollars of chip time one mean prefill occupies on ``pool``'s shape."""
    service = float(ev.prefill_service(pool.chip, pool.shape).mean())
    return service * pool.shape.chips * ev.chips[pool.chip].price_per_hour / 3600


def unit_costs(ev: Evaluator, design: Design) -> dict[str, float]:
    """The analytic unit costs behind a design's price (see the module docstring)."""
    drc = design.policy == PDD and ev.config.drc
    return {
        "prefill_usd_per_request": _prefill_cost_per_request(ev, design.prefill),
        "decode_usd_per_ktok": _decode_cost_per_ktok(ev, design.decode, drc),
    }


def verdict(
    ev: Evaluator,
    best: Mapping[str, Verification | None],
    chosen: Verification,
    *,
    single_site: bool,
    checked: Sequence[Verification] = (),
    aggregated_floor: float | None = None,
) -> dict[str, Any]:
    """Which family wins and why, with every confirmed family's cost and simulated BCR, and
    whether PDD beats the best aggregated design (``checked``: every design simulated;
    ``aggregated_floor``: the cheapest aggregated design the analytic model accepts)."""
    rows = []
    for family in FAMILIES:
        v = best.get(family)
        if v is None:
            continue
        rows.append(
            {
                "policy": family,
                "design": v.design.label(),
                "cost_per_hour": v.design.cost(ev.chips),
                "bcr": v.summary.bcr,
                **unit_costs(ev, v.design),
            }
        )
    pdd, homo, agg = (best.get(f) for f in FAMILIES)
    winner = chosen.design.policy
    others = [v for v in (homo, agg) if v is not None]
    cheapest_other = min(others, key=lambda v: v.design.cost(ev.chips), default=None)
    pays: bool | None = None
    if pdd is not None and cheapest_other is not None:
        pays = pdd.design.cost(ev.chips) < cheapest_other.design.cost(ev.chips)
    sentence = _sentence(ev, pdd, cheapest_other, winner, single_site)
    tried = [v for v in checked if v.design.policy == COLOCATED]
    return {
        "recommended": winner,
        "pdd_pays": pays,
        "sentence": sentence,
        "pdd_beats_aggregated": (
            None
            if pdd is None or agg is None
            else pdd.design.cost(ev.chips) < agg.design.cost(ev.chips)
        ),
        "versus_aggregated": versus_aggregated(ev, pdd, agg, tried, aggregated_floor),
        "designs": rows,
    }


def versus_aggregated(
    ev: Evaluator,
    pdd: Verification | None,
    aggregated: Verification | None,
    tried: Sequence[Verification],
    floor: float | None = None,
) -> str:
    """Whether PDD's confirmed design is cheaper than the best confirmed aggregated one at the
    same SLA, or why that is not settled: each aggregated design simulated and what it missed,
    and the cheapest aggregated design the analytic model accepts (``floor``, $/h)."""
    if pdd is None:
        return ""
    cost = pdd.design.cost(ev.chips)
    if aggregated is None:
        runs = "; ".join(
            f"{v.design.label()} ${v.design.cost(ev.chips):.1f}/h: TTFT P90 "
            f"{v.summary.ttft_p90:.2f} s / P99 {v.summary.ttft_p99:.2f} s, TPOT P99 "
            f"{v.summary.tpot_p99 * 1e3:.0f} ms, misses dominated by {v.cause}"
            for v in tried
        )
        sentence = (
            "Not settled: no aggregated design met the SLA within the simulation budget"
            + (f" ({runs})" if runs else "")
            + f"; PDD's ${cost:.1f}/h is compared with the homogeneous disaggregated design only."
        )
        if (
            floor is not None
            and floor > cost
            and all(v.design.cost(ev.chips) > cost for v in tried)
        ):
            sentence += (
                f" Every aggregated design simulated costs more than PDD and still missed, and "
                f"the analytic model accepts none below ${floor:.1f}/h."
            )
        return sentence
    other = aggregated.design.cost(ev.chips)
    verb = "beats" if cost < other else "does not beat"
    return (
        f"PDD {verb} the best aggregated design: ${cost:.1f}/h against ${other:.1f}/h for "
        f"{aggregated.design.label()} at the same SLA, both confirmed by the simulator "
        f"(PDD {1 - cost / other:+.1%} cheaper; simulated BCR {pdd.summary.bcr * 1e3:.2f} vs "
        f"{aggregated.summary.bcr * 1e3:.2f} x1000)."
    )


def _sentence(
    ev: Evaluator,
    pdd: Verification | None,
    other: Verification | None,
    winner: str,
    single_site: bool,
) -> str:
    if pdd is None:
        why = (
            "the inventory has one site, so there is no cross-datacenter placement"
            if single_site
            else "no PDD design met the SLA within the chip limits and simulation budget"
        )
        return f"PDD does not apply: {why}; the {NAMES[winner]} design is recommended."
    if other is None:
        return "PDD is the only family that met the SLA within the limits."
    a, b = pdd.design, other.design
    cost_a, cost_b = a.cost(ev.chips), b.cost(ev.chips)
    ua, ub = unit_costs(ev, a), unit_costs(ev, b)
    detail = (
        f"decode costs ${ua['decode_usd_per_ktok']:.4f} per 1000 tokens on PDD's MD "
        f"({a.decode.chip} {a.decode.shape.label()}) against ${ub['decode_usd_per_ktok']:.4f} "
        f"on the {NAMES[other.design.policy]} design's {b.decode.chip} "
        f"{b.decode.shape.label()}; a mean prefill costs ${ua['prefill_usd_per_request']:.4f} "
        f"against ${ub['prefill_usd_per_request']:.4f}"
    )
    relay = a.relay.cost(ev.chips) if a.relay is not None else 0.0
    if relay:
        detail += f"; PDD also pays ${relay:.1f}/h for its RLD pool"
    if cost_a < cost_b:
        return (
            f"PDD pays here: ${cost_a:.1f}/h against ${cost_b:.1f}/h for the best "
            f"{NAMES[other.design.policy]} design ({(1 - cost_a / cost_b):.1%} cheaper) at the "
            f"same SLA, because {detail}."
        )
    return (
        f"PDD does not pay here: the {NAMES[other.design.policy]} design costs "
        f"${cost_b:.1f}/h against PDD's ${cost_a:.1f}/h at the same SLA, because {detail}."
    )


def rld_mode_reason(ev: Evaluator, pdd_ranked: Sequence[Scored], chosen: Design) -> str:
    """Why the relay runs as its own pool or on P's instances (the cheaper of the two)."""
    if chosen.policy != PDD:
        return ""
    by_mode: dict[RldMode, Scored] = {}
    for scored in pdd_ranked:
        by_mode.setdefault(scored.design.rld_mode, scored)
    pool, shared = by_mode.get(RldMode.POOL), by_mode.get(RldMode.SHARED)
    relay = ev.evaluate(chosen).stage("RLD capacity")
    load = f"{relay.utilisation:.1%} of the relay slots busy" if relay is not None else ""
    if chosen.rld_mode is RldMode.SHARED:
        alt = (
            f"the cheapest design with its own RLD pool costs "
            f"${pool.evaluation.cost_per_hour:.1f}/h in the analytic model"
            if pool is not None
            else "no design with its own RLD pool met the SLA"
        )
        return (
            f"RLD mode shared-with-prefill: relayed and singular requests decode on P's "
            f"instances ({load}), which costs no extra replica; {alt}."
        )
    alt = (
        f"sharing P's instances would need ${shared.evaluation.cost_per_hour:.1f}/h "
        "(more P, to absorb the relay's decode steps)"
        if shared is not None
        else "sharing P's instances met no SLA within the limits (or P and RLD chips differ)"
    )
    chips = chosen.relay.chips if chosen.relay is not None else 0
    return f"RLD mode pool: a separate slice of {chips} chips ({load}); {alt}."
