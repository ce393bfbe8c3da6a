"""Whether a plan beats the baseline it was compared with, and if not, why, in words.

The plan page warns before activation when a plan is worse than its baseline on any of: hardware
cost per hour (more expensive), BCR (less goodput per $/h), goodput (fewer requests within the
SLA), or the SLA itself (the simulator says the plan misses it). Figures come from the plan's
own result (``pdd plan --json``: ``predicted`` and ``baseline.predicted``), nothing is recomputed.
"""

from __future__ import annotations

from typing import Any


def _number(block: dict[str, Any], key: str) -> float | None:
    value = block.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def shortfalls(result: dict[str, Any]) -> list[str]:
    """Reasons the plan does not beat its baseline; empty when it does (or has no baseline)."""
    mine = result.get("predicted") or {}
    theirs = (result.get("baseline") or {}).get("predicted") or {}
    reasons = []
    if mine.get("sla_met") is False:
        reasons.append("the simulator says this plan misses the SLA")
    if not theirs:
        return reasons
    cost, base_cost = _number(mine, "cost_per_hour"), _number(theirs, "cost_per_hour")
    if cost is not None and base_cost is not None and cost > base_cost:
        reasons.append(
            f"it costs more: ${cost:,.1f}/h against the baseline's ${base_cost:,.1f}/h "
            f"({cost / base_cost - 1:+.1%})"
            if base_cost > 0
            else f"it costs ${cost:,.1f}/h against the baseline's ${base_cost:,.1f}/h"
        )
    bcr, base_bcr = _number(mine, "bcr"), _number(theirs, "bcr")
    if bcr is not None and base_bcr is not None and bcr < base_bcr:
        reasons.append(
            f"its BCR is lower: {bcr * 1e3:.2f} against {base_bcr * 1e3:.2f} (x1000 req/s per $/h)"
        )
    goodput, base_goodput = _number(mine, "goodput_rps"), _number(theirs, "goodput_rps")
    if goodput is not None and base_goodput is not None and goodput < base_goodput:
        reasons.append(
            f"it serves less within the SLA: {goodput:.3f} req/s against {base_goodput:.3f}"
        )
    return reasons
