"""Closed-loop sessions in the analytic model: a design is offered the rate its answers pace.

Under ``SimConfig.closed_loop`` a session's next turn arrives when its previous answer has
ended, plus the trace's gap between the two turns (``sim/sessions.py``). A session of ``n``
turns then lasts its open-loop span plus ``n - 1`` answers, so the trace's ``N`` requests
arrive over ``N / rate + (n - 1) L`` seconds, where ``L`` is a design's mean answer time (TTFT
and the output at TPOT, at their P50s). The rate the design is offered is

    rate' = N / (N / rate + (n - 1) L) = rate / (1 + rate (n - 1) L / N)

(the simulator's run over the same trace stretches the same way). A faster design is offered
more: ``L`` depends on the rate and the rate on ``L``. ``paced_evaluation`` evaluates at the
open-loop rate and then at the rate that evaluation's answer time gives. A design with no steady
state at the open-loop rate is first evaluated at the slowest pace the SLA allows (``L`` at the
TTFT P90 and TPOT P90 targets): every design that meets the SLA is offered at least that rate,
so one that cannot keep up with it is out of reach. Open-loop workloads and workloads without
sessions are evaluated at their rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pdd_core.planner.capacity import Evaluation
from pdd_core.planner.profile import WorkloadProfile
from pdd_core.specs import SLA


def _answer(profile: WorkloadProfile, ttft: float, tpot: float) -> float:
    """The first token after ``ttft``, the rest of the mean output at ``tpot`` each."""
    return ttft + max(float(profile.output_tokens.mean()) - 1.0, 0.0) * tpot


def answer_s(evaluation: Evaluation, profile: WorkloadProfile) -> float:
    """A design's mean answer time: TTFT P50 plus the rest of the mean output at TPOT P50."""
    return _answer(profile, evaluation.ttft["p50"], evaluation.tpot["p50"])


def paced_rate(profile: WorkloadProfile, answer: float) -> float:
    """The rate ``profile``'s sessions offer when each answer takes ``answer`` seconds."""
    if not math.isfinite(answer):
        return 0.0
    stretch = (profile.turns_per_session - 1.0) * answer
    return profile.rate_rps / (1.0 + profile.rate_rps * stretch / max(profile.requests, 1))


def paced_evaluation(
    evaluate: Callable[[WorkloadProfile], Evaluation], profile: WorkloadProfile, sla: SLA
) -> Evaluation:
    """``evaluate`` at the rate a design's answers pace (module docstring)."""
    if profile.turns_per_session <= 1.0:
        return evaluate(profile)
    first = evaluate(profile)
    if not first.stable:
        slowest = _answer(profile, sla.ttft_p90_s, sla.tpot_p90_s)
        first = evaluate(profile.at_rate(paced_rate(profile, slowest)))
        if not first.stable:
            return first
    return evaluate(profile.at_rate(paced_rate(profile, answer_s(first, profile))))
