"""The plan page's verdict: the planner's own, with its stated tolerance (one judge).

The planner already compared every design family at the same SLA and measured their capacity
over independent workloads (``pdd_core.planner.verdict``); this page must not judge a second
time with other rules (it once printed "serves less within the SLA: 2.333 req/s against 2.333"
beside the planner's "PDD pays here"). So the page shows ``reasons["verdict"]`` as it is, and
warns before activation only where the planner's figures themselves say so: the simulator
found the plan missing its SLA, or the planner judged the recommended PDD design's advantage
to be within noise; and where this data plane cannot enact the plan's design (an aggregated
one, ``pdd_core.agent.desired.not_enacted_reason``), so activating it changes routing and the
version only.
"""

from __future__ import annotations

from typing import Any

from pdd_core.agent.desired import not_enacted_reason


def not_enacted_sentence(reason: str) -> str:
    """The one sentence Topology and the plan page show for an active plan not enacted."""
    return f"The active plan is {reason}, so it is not enacted: each site keeps the pools it runs."


def planner_verdict(result: dict[str, Any]) -> dict[str, str] | None:
    """The planner's judgement, sentence and tolerance, or None for a result without one."""
    verdict = (result.get("reasons") or {}).get("verdict") or {}
    if not isinstance(verdict, dict) or "sentence" not in verdict:
        return None
    return {
        "judgement": str(verdict.get("judgement", "")),
        "sentence": str(verdict["sentence"]),
        "tolerance": str(verdict.get("tolerance", "")),
    }


def shortfalls(result: dict[str, Any]) -> list[str]:
    """What the planner's own figures say against activating this plan, and that this plane
    cannot enact its design where it cannot; empty when nothing."""
    reasons = []
    design = not_enacted_reason(result.get("policy", "pdd"))
    if design is not None:
        reasons.append(
            f"this plan is {design}, so it would not be enacted: activating it changes only the "
            "routing table and the config version, and each site keeps the pools it runs"
        )
    if (result.get("predicted") or {}).get("sla_met") is False:
        reasons.append("the simulator says this plan misses the SLA")
    verdict = (result.get("reasons") or {}).get("verdict") or {}
    if (
        isinstance(verdict, dict)
        and verdict.get("recommended") == "pdd"
        and verdict.get("judgement") == "within noise"
    ):
        reasons.append(
            "the planner judges PDD's advantage within noise: " + str(verdict.get("sentence"))
        )
    return reasons
