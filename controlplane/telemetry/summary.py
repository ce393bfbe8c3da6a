"""The figures of one window, derived from its additive sums (one definition for the REST
summary, the live stream, the dashboard and the SLA rules).

- ``rps``: all records (rejected included) per second; ``goodput_rps``: served requests that
  met their SLA per second (DOMAIN.md section 5).
- hit rates over served requests: request-weighted (mean of per-request ratios) and
  token-weighted (hit tokens over input tokens); ``hit_bands``: served requests per band of
  ``pdd_core.metrics.HIT_BAND_EDGES``.
- TTFT P50/P90/P99 and TPOT P50/P90/P99 from the window's histograms (``telemetry.sketch``).
- ``tokens_per_s``: output tokens per second; ``wan_gbps``: WAN bytes x 8 / window / 10^9;
  ``rld_token_share``: RLD-decoded over RLD + MD decoded tokens.
- ``cost_per_hour``: the hardware cost rate of the pools behind the scope; ``bcr``: goodput over
  it (requests/s per $/h, as ``pdd_core.sim.summary``); ``revenue_per_hour`` from the price
  book and ``bcr_revenue`` = revenue per hour over cost per hour.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controlplane.telemetry import sketch
from controlplane.telemetry.rollups import WINDOW_NAMES, Delta
from pdd_core.metrics import HIT_BAND_EDGES

N_BANDS = len(HIT_BAND_EDGES) - 1


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def summarize(
    delta: Delta,
    *,
    window_s: int,
    start: datetime,
    scope: str,
    key: str,
    cost_per_hour: float | None,
) -> dict[str, Any]:
    """The JSON point of one window (values None where there is nothing to measure)."""
    c, s, m = delta.counts, delta.sums, delta.maps
    served = c["requests"] - c["rejected"]
    goodput = c["sla_met"] / window_s
    revenue_per_hour = s["revenue"] * 3600 / window_s
    has_cost = cost_per_hour is not None and cost_per_hour > 0
    decoded = c["rld_tokens"] + c["md_tokens"]
    point: dict[str, Any] = {
        "window": WINDOW_NAMES.get(window_s, f"{window_s}s"),
        "scope": scope,
        "key": key,
        "start": start.isoformat().replace("+00:00", "Z"),
        "requests": c["requests"],
        "served": served,
        "rejected": c["rejected"],
        "rps": c["requests"] / window_s,
        "goodput_rps": goodput,
        "hit_request_weighted": _ratio(s["hit_ratio_sum"], served),
        "hit_token_weighted": _ratio(c["hit_tokens"], c["input_tokens"]),
        "hit_bands": [int(m["hit_bands"].get(str(i), 0)) for i in range(N_BANDS)],
        "tokens_per_s": c["output_tokens"] / window_s,
        "input_tokens_per_s": c["input_tokens"] / window_s,
        "wan_gbps": c["wan_bytes"] * 8 / window_s / 1e9,
        "rld_token_share": _ratio(c["rld_tokens"], decoded),
        "handoffs": dict(sorted(m["handoffs"].items())),
        "pipelines": dict(sorted(m["pipelines"].items())),
        "cost_per_hour": cost_per_hour,
        "bcr": goodput / cost_per_hour if has_cost and cost_per_hour else None,
        "revenue_per_hour": revenue_per_hour,
        "bcr_revenue": revenue_per_hour / cost_per_hour if has_cost and cost_per_hour else None,
    }
    for name, qs in (("ttft", (50, 90, 99)), ("tpot", (50, 90, 99))):
        for q in qs:
            point[f"{name}_p{q}"] = sketch.quantile(m[f"{name}_hist"], q)
    return point
