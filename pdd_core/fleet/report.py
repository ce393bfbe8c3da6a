"""The fleet plan as text: the day, each demand's design at its peak, the chips per site, the
time it took (``pdd plan FLEET`` prints it; ``--json`` prints ``plan_fleet``'s data)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def render_fleet(plan: Mapping[str, Any]) -> str:
    out = [f"{plan['name']}: {plan['description']}", ""]
    out += _day(plan["day"])
    out += ["", *_demands(plan["demands"])]
    out += ["", *_sites(plan)]
    out += ["", *_timing(plan["timing"])]
    return "\n".join(out)


def _day(day: Sequence[Mapping[str, Any]]) -> list[str]:
    hours = [sum(t["requests_per_hour"][h] for t in day) for h in range(24)]
    total = sum(hours)
    tokens_in = sum(sum(t["input_tokens_per_hour"]) for t in day)
    tokens_out = sum(sum(t["output_tokens_per_hour"]) for t in day)
    out = [
        f"The day: {total:,} requests ({tokens_in / 1e9:,.1f} G input tokens, "
        f"{tokens_out / 1e9:,.2f} G output), busiest UTC hour {max(hours):,} requests, "
        f"quietest {min(hours):,}",
        f"{'tenant':<18}{'model':<18}{'region':<8}{'requests':>12}{'peak hour':>11}",
    ]
    for t in day:
        per_hour = t["requests_per_hour"]
        out.append(
            f"{t['tenant']:<18}{t['model']:<18}{t['region']:<8}"
            f"{sum(per_hour):>12,}{max(per_hour):>11,}"
        )
    return out


def _demands(demands: Sequence[Mapping[str, Any]]) -> list[str]:
    out = [
        "Each demand's design at its peak hour (searched on every k-th session, sized at full "
        "rate and simulated on the whole hour):",
        f"{'demand':<22}{'k':>3}  {'design':<58}{'chips':>6}{'$/h':>9}"
        f"{'TTFT P90':>9}{'TPOT P90':>9}  SLA",
    ]
    for d in demands:
        fleet = d.get("fleet")
        if fleet is None:
            explanation = d["slice_plan"].get("explanation", "no plan")
            out.append(f"{d['demand']:<22}{d['every']:>3}  no plan: {explanation}")
            continue
        out.append(
            f"{d['demand']:<22}{d['every']:>3}  {fleet['design'][:57]:<58}{fleet['chips']:>6}"
            f"{fleet['cost_per_hour']:>9,.0f}{_s(fleet['ttft_p90']):>9}"
            f"{_ms(fleet['tpot_p90']):>9}  {'met' if fleet['sla_met'] else 'MISSED'}"
        )
    out.append("")
    out.append("Does PDD pay? Each demand's planner verdict (on its slice, every family searched):")
    for d in demands:
        verdict = d["slice_plan"].get("reasons", {}).get("verdict") or {}
        out.append(f"- {d['demand']}: {verdict.get('sentence', 'no verdict (no plan)')}")
    return out


def _sites(plan: Mapping[str, Any]) -> list[str]:
    used: dict[tuple[str, str], int] = {}
    for d in plan["demands"]:
        for pool in (d.get("fleet") or {}).get("pools", []):
            key = (pool["site"], pool["chip"])
            used[key] = used.get(key, 0) + int(pool["chips"])
    out = [f"{'site':<12}{'chip':<10}{'used':>7}{'of':>7}"]
    for stock in plan["inventory"]:
        key = (stock["site"], stock["chip"])
        out.append(f"{key[0]:<12}{key[1]:<10}{used.get(key, 0):>7,}{stock['chips']:>7,}")
    cost = sum((d.get("fleet") or {}).get("cost_per_hour", 0.0) for d in plan["demands"])
    out.append(
        f"The fleet at its peaks: {sum(used.values()):,} of {plan['chips']:,} chips, "
        f"${cost:,.0f}/h (each demand at its own region's peak hour)"
    )
    return out


def _timing(timing: Mapping[str, Any]) -> list[str]:
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in timing["phases_wall_s"].items())
    peaks = ", ".join(f"{v:.0f}" for v in timing["peak_rss_mb_per_worker"].values())
    simulated = timing["simulated_requests"]
    cpu = timing["tasks_cpu_s"]
    return [
        f"Wall {timing['wall_s']:.0f} s ({phases}); CPU {cpu:.0f} s in tasks "
        f"+ {timing['parent_cpu_s']:.0f} s here; peak memory per worker {peaks} MB; "
        f"{simulated:,} simulated requests",
    ]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.0f} ms"
