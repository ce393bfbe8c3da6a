"""The alerts page: open and recent alerts with units, durations and a link to the overview at
their time range, and the SLA rules (operators add and delete them).

Times are shown in UTC and say so (the control plane's ``TIME_ZONE``); a latency value is in
seconds (or milliseconds below one), goodput in requests per second. The overview link opens
the alert's range with five minutes either side, its open period shaded, in the rule's scope
(a tenant's rule opens that tenant's overview).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from controlplane.accounts.selectors import user_scope
from controlplane.core.services import model_create, model_delete
from controlplane.telemetry import selectors as telemetry
from controlplane.telemetry.models import Alert, AlertMetric, AlertState, SlaRule
from frontend.access import operator_page
from frontend.units import NO_FIGURE, duration_text

CONTEXT_S = 5 * 60  # of the overview either side of an alert


def metric_text(metric: str, value: float | None) -> str:
    """A rule's metric value with its unit."""
    if value is None:
        return NO_FIGURE
    if metric == AlertMetric.GOODPUT:
        return f"{value:.3g} req/s"
    return duration_text(value)


def _iso(t: Any) -> str:
    return str(t.isoformat().replace("+00:00", "Z"))


def overview_link(alert: Alert) -> str:
    """The overview at the alert's time range, its open period marked."""
    end = alert.resolved_at or timezone.now()
    query = {
        "from": _iso(alert.first_seen - timedelta(seconds=CONTEXT_S)),
        "to": _iso(end + timedelta(seconds=CONTEXT_S)),
        "mark_from": _iso(alert.first_seen),
        "scope": f"tenant:{alert.rule.tenant}" if alert.rule.tenant else "all",
    }
    if alert.resolved_at:
        query["mark_to"] = _iso(alert.resolved_at)
    return f"{reverse('home')}?{urlencode(query)}"


def alert_row(alert: Alert) -> dict[str, Any]:
    """One alert as the tables show it."""
    metric = alert.rule.metric
    end = alert.resolved_at or timezone.now()
    comparison = "<" if alert.rule.is_floor else ">"
    return {
        "alert": alert,
        "value": metric_text(metric, alert.value),
        "worst": metric_text(metric, alert.worst),
        "threshold": f"{comparison} {metric_text(metric, alert.threshold)}",
        "duration": duration_text((end - alert.first_seen).total_seconds()),
        "link": overview_link(alert),
    }


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
    rules = [
        {"rule": r, "threshold": metric_text(r.metric, r.threshold)}
        for r in telemetry.sla_rule_list()
    ]
    context = {
        "open_alerts": [alert_row(a) for a in telemetry.alert_list(state=AlertState.OPEN)],
        "recent": [alert_row(a) for a in telemetry.alert_list(state=AlertState.RESOLVED)[:50]],
        "rules": rules,
        "metrics": AlertMetric.choices,
        "errors": errors,
        "form": request.POST if errors else {},
    }
    return render(request, "frontend/dashboard/alerts.html", context, status=400 if errors else 200)
