"""``report.html``: one self-contained page of charts for one or more simulated policies.

Plotly is imported inside ``write_report`` (importing ``pdd_core`` stays cheap) and plotly.js is
embedded inline from ``plotly.offline.get_plotlyjs()``, so the page opens with no network:
TTFT CDF, hit-band breakdown, WAN utilisation over time, pipeline mix and RLD token share.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdd_core.units import BCR_UNIT, SECONDS_PER_HOUR

if TYPE_CHECKING:
    from pdd_core.sim import SimResult

# The compared figures (``pdd_core.sim.summary.COMPARE_KEYS``) as people read them: label
# and the factor into the label's unit (``pdd compare`` and report.html).
COMPARE_ROWS: tuple[tuple[str, str, float], ...] = (
    ("ttft_p50", "TTFT P50 (s)", 1.0),
    ("ttft_p90", "TTFT P90 (s)", 1.0),
    ("ttft_p99", "TTFT P99 (s)", 1.0),
    ("tpot_p50", "TPOT P50 (ms)", 1e3),
    ("tpot_p99", "TPOT P99 (ms)", 1e3),
    ("goodput_rps", "goodput (req/s)", 1.0),
    ("cost_per_hour", "cost ($/h)", 1.0),
    ("bcr", f"BCR ({BCR_UNIT})", SECONDS_PER_HOUR),
    ("wan_gbps_mean", "WAN mean (Gbps)", 1.0),
    ("wan_gbps_peak", "WAN peak (Gbps)", 1.0),
    ("wan_gbps_busy_mean", "WAN busy mean (Gbps)", 1.0),
    ("rld_token_share", "RLD token share", 1.0),
    ("rejected", "rejected (429)", 1.0),
    ("singular_share", "singular (P-RLD) share", 1.0),
    ("hit_token_weighted", "P hit seen (token-w.)", 1.0),
    ("trace_hit_token_weighted", "trace's own hit (token-w.)", 1.0),
)


def write_report(path: Path | str, title: str, results: Mapping[str, SimResult]) -> Path:
    """Write the page for ``results`` (policy name -> result) and return its path."""
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    figures = [
        _ttft_cdf(go, results),
        _hit_bands(go, results),
        _wan(go, results),
        *_mix_and_rld(go, results),
    ]
    divs = "\n".join(
        fig.to_html(full_html=False, include_plotlyjs=False, default_height="420px")
        for fig in figures
    )
    table = _summary_table(results)
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{table}{divs}</body></html>"
    )
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out


def _ttft_cdf(go: Any, results: Mapping[str, SimResult]) -> Any:
    cdf = go.Figure()
    for policy, result in results.items():
        ttft = sorted(r.ttft_s for r in result.records if not r.rejected)
        n = len(ttft)
        step = max(1, n // 2000)  # at most ~2000 points per curve keeps the page small
        xs = ttft[::step]
        ys = [(i * step + 1) / n for i in range(len(xs))]
        cdf.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=policy))
    cdf.update_layout(title="TTFT CDF", xaxis_title="TTFT (s)", yaxis_title="share of requests")
    return cdf


def _hit_bands(go: Any, results: Mapping[str, SimResult]) -> Any:
    bands = go.Figure()
    for policy, result in results.items():
        rows = result.summary.hit_bands
        bands.add_trace(
            go.Bar(
                x=[row["band"] for row in rows],
                y=[_num(row["ttft_p50"]) for row in rows],
                name=f"{policy} TTFT P50",
            )
        )
    first = next(iter(results.values()))
    shares = [float(row["share"]) for row in first.summary.hit_bands]
    bands.add_trace(
        go.Scatter(
            x=[row["band"] for row in first.summary.hit_bands],
            y=shares,
            name="share of requests",
            yaxis="y2",
            mode="lines+markers",
        )
    )
    bands.update_layout(
        title="Hit-band breakdown",
        xaxis_title="prefix hit at P",
        yaxis_title="TTFT P50 (s)",
        yaxis2={"title": "share of requests", "overlaying": "y", "side": "right",
                "range": [0, 1.15 * max(shares, default=1.0) or 1.0], "tickformat": ".0%",
                "showgrid": False},
        barmode="group",
        legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    return bands


def _wan(go: Any, results: Mapping[str, SimResult]) -> Any:
    wan = go.Figure()
    for policy, result in results.items():
        if result.wan_series:
            wan.add_trace(
                go.Scatter(
                    x=[t for t, _ in result.wan_series],
                    y=[g for _, g in result.wan_series],
                    mode="lines",
                    name=policy,
                )
            )
    wan.update_layout(title="WAN utilisation", xaxis_title="time (s)", yaxis_title="Gbps")
    return wan


def _mix_and_rld(go: Any, results: Mapping[str, SimResult]) -> tuple[Any, Any]:
    mix = go.Figure()
    names = sorted({k for r in results.values() for k in r.summary.pipeline_mix})
    for name in names:
        mix.add_trace(
            go.Bar(
                x=list(results),
                y=[r.summary.pipeline_mix.get(name, 0.0) for r in results.values()],
                name=name,
            )
        )
    share_axis = {"range": [0, 1], "tickformat": ".0%"}
    mix.update_layout(title="Pipeline mix", barmode="stack",
                      yaxis={"title": "share of requests", **share_axis})  # fmt: skip
    rld = go.Figure(
        go.Bar(x=list(results), y=[r.summary.rld_token_share for r in results.values()])
    )
    rld.update_layout(title="Share of output tokens decoded on RLD",
                      yaxis={"title": "share", **share_axis})  # fmt: skip
    return mix, rld


def _num(value: float) -> float | None:
    return None if math.isnan(value) else value


def _summary_table(results: Mapping[str, SimResult]) -> str:
    """The compared figures, labelled with their units as ``pdd compare`` prints them."""
    head = "".join(f"<th>{html.escape(p)}</th>" for p in results)
    rows = []
    for key, label, scale in COMPARE_ROWS:
        cells = "".join(
            f"<td>{_cell(r.summary.compare_dict()[key], scale)}</td>" for r in results.values()
        )
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def _cell(value: float, scale: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value * scale:.4g}"
