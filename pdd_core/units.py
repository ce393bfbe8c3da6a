"""BCR in the unit every page and every planner sentence shows: good requests per dollar.

BCR (DOMAIN.md section 5) is goodput over the hardware cost rate. The simulator
(``pdd_core.sim.summary``, ``pdd plan --json``'s ``bcr``) and telemetry (``telemetry.summary``'s
``bcr``) report it as requests per second per dollar per hour. People read the same ratio as
**good requests per dollar** of hardware: (good requests / s) / ($ / h) x 3,600 s / h. Same
figure, a readable scale: 0.0268 req/s per $/h is 96.5 good requests per $. The pages
(``frontend.units``, and ``units.js``'s twin for live figures) and the planner's reasons and
verdict all convert here, so they never disagree.
"""

from __future__ import annotations

import math

SECONDS_PER_HOUR = 3600.0
BCR_UNIT = "good requests per $"


def bcr_per_dollar(bcr_req_s_per_dollar_h: float) -> float:
    """A BCR in req/s per $/h (the simulator's and telemetry's) as good requests per $."""
    return bcr_req_s_per_dollar_h * SECONDS_PER_HOUR


def bcr_figure(bcr_req_s_per_dollar_h: float) -> str:
    """The figure in good requests per $ (three significant digits, at least a whole number);
    "not measured" where it is not finite (no cost to divide by)."""
    if not math.isfinite(bcr_req_s_per_dollar_h):
        return "not measured"
    value = bcr_per_dollar(bcr_req_s_per_dollar_h)
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
