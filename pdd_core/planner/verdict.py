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
from pdd_core.planner.design import COLOCATED, FAMILIES, FAMILY_NAMES, PDD, Design, PoolChoice
from pdd_core.planner.search import Scored
from pdd_core.planner.stages import evaluate
from pdd_core.planner.verify import Verification
from pdd_core.sim.measure import MeasuredCapacity, paired_ratio
from pdd_core.specs import RldMode
from pdd_core.units import BCR_UNIT, bcr_figure

TOLERANCE = (
    "PDD is said to pay only when it is the cheaper design at the SLA and the 95% interval of "
    "its BCR ratio (capacity per $/h, paired over the same independent workloads) against the "
    "best other family lies above 1; it does not pay when it costs more and the interval lies "
    "below 1; when the two disagree (cheaper at this load but less capacity per dollar, or the "
    "reverse) the verdict is mixed; otherwise the difference is within noise."
)

NAMES = FAMILY_NAMES


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
    service = float(ev.prefill_occupancy(pool.chip, pool.shape).mean())
    return service * pool.shape.chips * ev.chips[pool.chip].price_per_hour / 3600


def unit_costs(ev: Evaluator, design: Design) -> dict[str, float]:
    """The analytic unit costs behind a design's price (see the module docstring)."""
    drc = design.policy == PDD and ev.config.drc
    return {
        "prefill_usd_per_request": _prefill_cost_per_request(ev, design.prefill),
        "decode_usd_per_ktok": _decode_cost_per_ktok(ev, design.decode, drc),
    }


def _row(
    ev: Evaluator,
    family: str,
    v: Verification | None,
    measured: MeasuredCapacity | None,
    checked: Sequence[Verification],
) -> dict[str, Any]:
    """One family's line of the verdict: its best design, cost, capacity and how it was found."""
    runs = [c for c in checked if c.design.family == family]
    row: dict[str, Any] = {
        "policy": family,
        "name": NAMES[family],
        "simulations": len(runs),
        "simulated": [
            {
                "design": c.design.label(),
                "spec": c.design.to_dict(),
                "cost_per_hour": c.design.cost(ev.chips),
                "sla_met": bool(c.summary.sla_met),
                "cause": c.cause,
                "missed": list(c.missed),
            }
            for c in runs
        ],
        "found": v is not None,
    }
    if v is None:
        return row
    row.update(
        design=v.design.label(),
        spec=v.design.to_dict(),
        pools=[p.to_dict() for p in v.design.pools],
        chunk_tokens=v.design.prefill.chunk_tokens,
        cost_per_hour=v.design.cost(ev.chips),
        bcr=v.summary.bcr,
        found_at=1 + runs.index(v) if v in runs else None,
        **unit_costs(ev, v.design),
    )
    if measured is not None:
        row["capacity"] = measured.to_dict()
    return row


def verdict(
    ev: Evaluator,
    best: Mapping[str, Verification | None],
    chosen: Verification,
    *,
    single_site: bool,
    checked: Sequence[Verification] = (),
    aggregated_floor: float | None = None,
    measured: Mapping[str, MeasuredCapacity] | None = None,
    no_pdd: str = "",
) -> dict[str, Any]:
    """Which family wins, whether PDD pays within the stated tolerance (``TOLERANCE``), and a
    row per family: its best confirmed design, cost, capacity with its interval, and every
    design the search simulated (``checked``). ``no_pdd`` says what binds when PDD has none."""
    measured = measured or {}
    rows = [_row(ev, f, best.get(f), measured.get(f), checked) for f in FAMILIES]
    pdd = best.get(PDD)
    others = [v for f, v in best.items() if f != PDD and v is not None]
    other = min(others, key=lambda v: (v.design.cost(ev.chips), -v.summary.bcr), default=None)
    judgement, ratio = _judge(ev, pdd, other, measured)
    agg = best.get(COLOCATED)
    tried = [v for v in checked if v.design.policy == COLOCATED]
    return {
        "recommended": chosen.design.family,
        "pdd_pays": {"pays": True, "does not pay": False}.get(judgement),
        "judgement": judgement,
        "tolerance": TOLERANCE,
        "bcr_ratio": ratio,
        "versus": other.design.family if other is not None else None,
        "sentence": _sentence(
            ev,
            pdd,
            other,
            winner=chosen.design.family,
            single_site=single_site,
            judgement=judgement,
            ratio=ratio,
            no_pdd=no_pdd,
        ),
        "pdd_beats_aggregated": (
            None
            if pdd is None or agg is None
            else pdd.design.cost(ev.chips) < agg.design.cost(ev.chips)
        ),
        "versus_aggregated": versus_aggregated(
            ev, pdd, agg, tried, aggregated_floor, no_pdd=no_pdd
        ),
        "designs": [r for r in rows if r["found"]],
        "families": rows,
    }


def _judge(
    ev: Evaluator,
    pdd: Verification | None,
    other: Verification | None,
    measured: Mapping[str, MeasuredCapacity],
) -> tuple[str, dict[str, float] | None]:
    """The judgement word of ``TOLERANCE`` and the paired BCR ratio behind it."""
    if pdd is None:
        return "not applicable", None
    if other is None:
        return "only PDD met the SLA", None
    mine, theirs = measured.get(PDD), measured.get(other.design.family)
    if mine is None or theirs is None:
        return "not measured", None
    point, low, high = paired_ratio(mine, theirs)
    ratio = {"point": point, "low": low, "high": high}
    cheaper = pdd.design.cost(ev.chips) < other.design.cost(ev.chips)
    dearer = pdd.design.cost(ev.chips) > other.design.cost(ev.chips)
    if cheaper and low > 1.0:
        return "pays", ratio
    if dearer and high < 1.0:
        return "does not pay", ratio
    if (cheaper and high < 1.0) or (dearer and low > 1.0):
        return "mixed", ratio
    return "within noise", ratio


def versus_aggregated(
    ev: Evaluator,
    pdd: Verification | None,
    aggregated: Verification | None,
    tried: Sequence[Verification],
    floor: float | None = None,
    *,
    no_pdd: str = "",
) -> str:
    """Whether PDD's confirmed design is cheaper than the best confirmed aggregated one at the
    same SLA, or why that is not settled: each aggregated design simulated and what it missed,
    and the cheapest aggregated design the analytic model accepts (``floor``, $/h). Always a
    sentence: without a PDD design it says what binds PDD (``no_pdd``) and what aggregated
    serving costs."""
    if pdd is None:
        agg = (
            f"the best aggregated design, {aggregated.design.label()}, costs "
            f"${aggregated.design.cost(ev.chips):.1f}/h at the SLA (confirmed by the simulator)"
            if aggregated is not None
            else "no aggregated design met the SLA within the simulation budget either"
        )
        return f"No PDD design to compare: {no_pdd or 'PDD does not apply'}; {agg}."
    cost = pdd.design.cost(ev.chips)
    if aggregated is None:
        runs = "; ".join(
            f"{v.design.label()} ${v.design.cost(ev.chips):.1f}/h: TTFT P90 "
            f"{v.summary.ttft_p90:.2f} s / P99 {v.summary.ttft_p99:.2f} s, TPOT P99 "
            f"{v.summary.tpot_p99 * 1e3:.0f} ms, {v.miss_text()}"
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
    # "PDD -25% cheaper" read as a saving; the gap is said in the direction it goes.
    gap = f"{1 - cost / other:.1%} cheaper" if cost < other else f"{cost / other - 1:.1%} dearer"
    return (
        f"PDD {verb} the best aggregated design: ${cost:.1f}/h against ${other:.1f}/h for "
        f"{aggregated.design.label()} at the same SLA, both confirmed by the simulator "
        f"(PDD {gap}; simulated BCR {bcr_figure(pdd.summary.bcr)} vs "
        f"{bcr_figure(aggregated.summary.bcr)} {BCR_UNIT})."
    )


def _sentence(
    ev: Evaluator,
    pdd: Verification | None,
    other: Verification | None,
    *,
    winner: str,
    single_site: bool,
    judgement: str,
    ratio: Mapping[str, float] | None,
    no_pdd: str,
) -> str:
    if pdd is None:
        why = no_pdd or (
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
        f"on the {NAMES[b.family]} design's {b.decode.chip} "
        f"{b.decode.shape.label()}; a mean prefill costs ${ua['prefill_usd_per_request']:.4f} "
        f"against ${ub['prefill_usd_per_request']:.4f}"
    )
    relay = a.relay.cost(ev.chips) if a.relay is not None else 0.0
    if relay:
        detail += f"; PDD also pays ${relay:.1f}/h for its RLD pool"
    figures = f"${cost_a:.1f}/h against ${cost_b:.1f}/h for the best {NAMES[b.family]} design"
    if ratio is not None:
        figures += (
            f" (BCR ratio {ratio['point']:.2f}, 95% interval {ratio['low']:.2f}-"
            f"{ratio['high']:.2f}, paired over independent workloads)"
        )
    if judgement == "pays":
        saving = 1 - cost_a / cost_b
        return f"PDD pays here: {figures}, {saving:.1%} cheaper at the same SLA, because {detail}."
    if judgement == "does not pay":
        return f"PDD does not pay here: {figures} at the same SLA, because {detail}."
    if judgement == "mixed":
        cheaper = cost_a < cost_b
        return (
            f"Mixed: PDD costs {figures} at the same SLA: "
            + (
                "cheaper at this load (whole nodes), but it carries less per dollar at capacity, "
                "so with growth the other design is the better buy"
                if cheaper
                else "dearer at this load (whole nodes), but it carries more per dollar at "
                "capacity, so it pays only once the load grows into it"
            )
            + f"; {detail}."
        )
    if judgement == "not measured":
        return (
            f"PDD costs {figures} at the same SLA; capacity was not measured over independent "
            f"workloads ([planner] capacity_seeds = 0), so whether that is beyond noise is not "
            f"said; {detail}."
        )
    return (
        f"Within noise: PDD costs {figures} at the same SLA; the interval includes 1, so "
        f"neither pays beyond the noise of the workload; {detail}."
    )


def rld_mode_reason(ev: Evaluator, pdd_ranked: Sequence[Scored], chosen: Design) -> str:
    """Why the relay runs as its own pool or on P's instances (the cheaper of the two)."""
    if chosen.policy != PDD:
        return ""
    by_mode: dict[RldMode, Scored] = {}
    for scored in pdd_ranked:
        by_mode.setdefault(scored.design.rld_mode, scored)
    pool, shared = by_mode.get(RldMode.POOL), by_mode.get(RldMode.SHARED)
    relay = evaluate(ev, chosen).stage("RLD capacity")
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
