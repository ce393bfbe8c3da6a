"""Monitoring pages: the live overview ("/"), the topology and the alerts.

Each page renders its first figures from server JSON (``json_script``); the small modules in
``static/frontend/js/`` then append the points ``/ws/live/`` pushes. Reads go through the
selectors; the one write (SLA rules on the alerts page) goes through the shared services and
is refused to viewers.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from controlplane.accounts.selectors import user_scope
from controlplane.agents import selectors as agents
from controlplane.core.services import model_create, model_delete
from controlplane.inventory import selectors as inventory
from controlplane.telemetry import integrations
from controlplane.telemetry import selectors as telemetry
from controlplane.telemetry.models import AlertMetric, AlertState, SlaRule
from frontend.access import operator_page

SERIES_POINTS = 120  # ten minutes of 5 s windows


@operator_page
def overview(request: HttpRequest) -> HttpResponse:
    """Live KPIs and the overview charts of the whole deployment."""
    data: dict[str, Any] = {
        "series": telemetry.series(window_s=5, scope="all", points=SERIES_POINTS),
        "sla": telemetry.sla_lines(),
        "wan_capacity_gbps": telemetry.wan_capacity_gbps(),
        "open_alerts": telemetry.open_alert_count(),
        **telemetry.plan_context(),
    }
    context = {"data": data, "latest": data["series"][-1] if data["series"] else None,
               "has_planning": data["plan_version"] is not None,
               "journal_warnings": agents.journal_warnings()}  # fmt: skip
    return render(request, "frontend/dashboard/overview.html", context)


@operator_page
def topology(request: HttpRequest) -> HttpResponse:
    """Sites with their pools, links with capacity and live utilisation, chips, models, agents."""
    pools = list(inventory.instance_pool_list())
    site_list = list(inventory.site_list())
    sites = [{"site": s, "pools": [p for p in pools if p.site_id == s.pk]} for s in site_list]
    site_wan: dict[str, float] = {}
    for site in site_list:
        latest = telemetry.series(window_s=5, scope="site", key=site.slug, points=12)
        point = telemetry.latest_closed(latest, 5)
        site_wan[site.slug] = point["wan_gbps"] if point else 0.0
    link_rows = [
        {"link": link, "gbps": site_wan.get(link.source.slug, 0.0) if link.kind == "wan" else None}
        for link in inventory.link_list()
    ]
    context = {
        "sites": sites,
        "links": link_rows,
        "chips": inventory.chip_model_list(),
        "models": inventory.model_profile_list(),
        "agents": integrations.agents(),
        "live_sites": [s.slug for s in site_list],
    }
    return render(request, "frontend/dashboard/topology.html", context)


def _rule_from_post(request: HttpRequest) -> SlaRule:
    post = request.POST
    return model_create(
        SlaRule,
        {
            "slug": post.get("slug", ""), "name": post.get("name", ""),
            "model": post.get("model", ""), "tenant": post.get("tenant", ""),
            "metric": post.get("metric", ""), "threshold": post.get("threshold") or None,
            "window_s": post.get("window_s") or 60, "webhook_url": post.get("webhook_url", ""),
        },
    )  # fmt: skip


@operator_page
@require_http_methods(["GET", "POST"])
def alerts(request: HttpRequest) -> HttpResponse:
    """Open and recent alerts, and the SLA rules (operators may add and delete rules)."""
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        if user_scope(request.user) != "operator":
            raise PermissionDenied("Viewers cannot change SLA rules.")
        if "delete" in request.POST:
            model_delete(get_object_or_404(SlaRule, slug=request.POST["delete"]))
            messages.success(request, "Rule deleted.")
            return redirect("alerts")
        try:
            rule = _rule_from_post(request)
        except ValidationError as exc:
            errors = exc.message_dict
        else:
            messages.success(request, f"Rule {rule.slug} created.")
            return redirect("alerts")
    context = {
        "open_alerts": telemetry.alert_list(state=AlertState.OPEN),
        "recent": telemetry.alert_list(state=AlertState.RESOLVED)[:50],
        "rules": telemetry.sla_rule_list(),
        "metrics": AlertMetric.choices,
        "errors": errors,
        "form": request.POST if errors else {},
    }
    return render(request, "frontend/dashboard/alerts.html", context, status=400 if errors else 200)
