"""BCR and cost as every page shows them: one unit, one scale, one explanation.

BCR's unit and its conversion (req/s per $/h to good requests per $) live in
``pdd_core.units``, which the planner's sentences use too; this module adds what only pages
need: the en dash for no figure, the help texts, and durations for people. The overview, the
plan page and the plan's verdict all go through ``bcr_per_dollar`` (and ``units.js``'s twin for
live figures), so they never disagree.
"""

from __future__ import annotations

import math

from pdd_core.units import BCR_UNIT, SECONDS_PER_HOUR, bcr_figure, bcr_per_dollar

__all__ = [
    "BCR_HELP",
    "BCR_UNIT",
    "COST_PER_MTOK_HELP",
    "NO_FIGURE",
    "SECONDS_PER_HOUR",
    "bcr_per_dollar",
    "bcr_text",
    "duration_text",
    "money_text",
]

NO_FIGURE = "\u2013"  # the en dash pages show where there is nothing to measure
BCR_HELP = (
    "BCR (benefit-cost ratio): requests served within the SLA per dollar of hardware, "
    "i.e. goodput (req/s) / hardware cost ($/h) x 3600. Higher is better; 0 means no request "
    "met the SLA in the window."
)
COST_PER_MTOK_HELP = (
    "Hardware cost per million output tokens: cost per hour / (output tokens per second x 3600)"
    " x 10^6."
)


def bcr_text(bcr_req_s_per_dollar_h: float | None) -> str:
    """The figure as pages print it (``pdd_core.units.bcr_figure``), the en dash for none."""
    if bcr_req_s_per_dollar_h is None or not math.isfinite(bcr_req_s_per_dollar_h):
        return NO_FIGURE
    return bcr_figure(bcr_req_s_per_dollar_h)


def duration_text(seconds: float | None) -> str:
    """Seconds for people, as ``units.js``'s ``duration``: 850 ms, 3.2 s, 4 min 05 s, 2 h 10 min."""
    if seconds is None:
        return NO_FIGURE
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{round(seconds)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min {round(seconds % 60):02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def money_text(dollars: float | None) -> str:
    """Dollars as ``units.js``'s ``money``: cents below $100, whole dollars with commas above."""
    if dollars is None or not math.isfinite(dollars):
        return NO_FIGURE
    return f"${round(dollars):,}" if dollars >= 100 else f"${dollars:.2f}"
