"""The live overview ("/"): KPIs, the SLA panel and the charts of one scope over one time range.

``?range=15m|1h|6h|24h`` picks the windows the charts draw (5 s windows for 15 minutes, 1-minute
windows beyond); ``?scope=all|site:<slug>|tenant:<slug>`` the rollups they read (the summary
API's ``scope=``); ``?from=&to=`` (ISO 8601, as the alerts page links an alert) shows a past
range instead, still updating if it reaches the present. The first figures come from server
JSON (``json_script``); ``static/frontend/js/overview.js`` then appends what ``/ws/live/`` pushes
and takes the deployment's state (alerts, agents, plan, SLA panel) from the same socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from controlplane.accounts.selectors import user_scope
from controlplane.agents import selectors as agents
from controlplane.inventory import selectors as inventory
from controlplane.planning.drift import plan_drift
from controlplane.telemetry import selectors as telemetry
from controlplane.telemetry.dead_letters import dead_letter_counts
from controlplane.telemetry.live import split_scope
from controlplane.telemetry.state import state_read
from frontend import units
from frontend.access import BILLING_PAGES, OPERATOR_PAGES, home_url, operator_page
from frontend.plan_pages import bathtub_figure


@dataclass(frozen=True)
class TimeRange:
    """A choice of the range picker: its length and the rollup window that draws it."""

    slug: str
    label: str
    seconds: int
    window_s: int

    @property
    def points(self) -> int:
        return self.seconds // self.window_s


RANGES = {
    r.slug: r
    for r in (
        TimeRange("15m", "15 min", 15 * 60, 5),
        TimeRange("1h", "1 h", 3600, 60),
        TimeRange("6h", "6 h", 6 * 3600, 60),
        TimeRange("24h", "24 h", 24 * 3600, 60),
    )
}
DEFAULT_RANGE = "15m"
OVERVIEW_SCOPES = frozenset({"all", "site", "tenant"})
# A past range shorter than this is drawn from 5 s windows, a longer one from 1-minute windows.
HISTORY_FINE_S = 30 * 60
HISTORY_MAX_S = 48 * 3600


def _history(request: HttpRequest) -> tuple[datetime, datetime] | None:
    """The ``from``/``to`` range asked for, clamped to the retention, or None."""
    start = parse_datetime(request.GET.get("from", "") or "")
    end = parse_datetime(request.GET.get("to", "") or "") or timezone.now()
    if start is None or start.tzinfo is None or end.tzinfo is None or end <= start:
        return None
    return max(start, end - timedelta(seconds=HISTORY_MAX_S)), end


def _scope_choices() -> list[dict[str, str]]:
    """All, each site, each tenant with telemetry: the scope picker's options."""
    sites = [s.slug for s in inventory.site_list()]
    tenants = telemetry.scope_keys("tenant")
    return [
        {"value": "all", "label": "Whole deployment"},
        *({"value": f"site:{slug}", "label": f"Site {slug}"} for slug in sites),
        *({"value": f"tenant:{slug}", "label": f"Tenant {slug}"} for slug in tenants),
    ]


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def overview_data(scope: str, key: str, chosen: TimeRange, history: Any) -> dict[str, Any]:
    """The page's JSON: the series of the range, targets, capacity and the state snapshot."""
    if history is not None:
        start, end = history
        span = (end - start).total_seconds()
        window_s = 5 if span <= HISTORY_FINE_S else 60
        points = int(span // window_s) + 1
        series = telemetry.series(window_s=window_s, scope=scope, key=key, points=points, end=end)
        x_range = [_iso(start), _iso(end)]
    else:
        window_s, points = chosen.window_s, chosen.points
        series = telemetry.series(window_s=window_s, scope=scope, key=key, points=points)
        x_range = None
    return {
        "series": series,
        "window": "5s" if window_s == 5 else "1m",
        "window_s": window_s,
        "range_s": chosen.seconds if history is None else None,
        "x_range": x_range,
        "max_points": points,
        "scope": scope,
        "key": key,
        "sla": telemetry.sla_lines(),
        "wan_capacity_gbps": telemetry.wan_capacity_gbps(),
        "state": state_read(scope, key),
        "bcr_help": units.BCR_HELP,
        **telemetry.plan_context(),
    }


def _range_link(chosen: TimeRange, scope: str, *, current: bool) -> dict[str, Any]:
    href = f"?range={chosen.slug}&scope={scope}"
    return {"label": chosen.label, "href": href, "current": current}


def overview(request: HttpRequest) -> HttpResponse:
    """Billing users start on the billing pages; everyone else may read the overview."""
    scope = user_scope(request.user) if request.user.is_authenticated else None
    if scope in BILLING_PAGES and scope not in OPERATOR_PAGES:
        return redirect(home_url(scope))
    return _overview(request)


@operator_page
def _overview(request: HttpRequest) -> HttpResponse:
    raw_scope = request.GET.get("scope", "all")
    found = split_scope(raw_scope, OVERVIEW_SCOPES) or ("all", "")
    scope_value = f"{found[0]}:{found[1]}" if found[1] else "all"
    chosen = RANGES.get(request.GET.get("range", DEFAULT_RANGE), RANGES[DEFAULT_RANGE])
    history = _history(request)
    data = overview_data(found[0], found[1], chosen, history)
    drift = plan_drift()
    context = {
        "drift": drift,
        "drift_figure": bathtub_figure({"bathtub": drift["bathtub"]}, drift["position"])
        if drift and drift["bathtub"]
        else None,
        "can_plan": user_scope(request.user) == "operator",
        "data": data,
        "ranges": [
            _range_link(r, scope_value, current=history is None and r is chosen)
            for r in RANGES.values()
        ],
        "range_slug": chosen.slug,
        "scope_value": scope_value,
        "scopes": _scope_choices(),
        "history": {"from": history[0], "to": history[1]} if history else None,
        "has_planning": data["plan_version"] is not None,
        "journal_warnings": agents.journal_warnings(),
        "dead_letters": [c for c in dead_letter_counts() if c.pending],
        "window_label": "5 s window" if data["window_s"] == 5 else "1 min window",
        "bcr_unit": units.BCR_UNIT,
        "bcr_help": units.BCR_HELP,
        "cost_per_mtok_help": units.COST_PER_MTOK_HELP,
    }
    return render(request, "frontend/dashboard/overview.html", context)
