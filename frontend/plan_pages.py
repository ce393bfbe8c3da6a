"""Plan pages: the list with a create form, and one plan (pools, cost table, bathtub, reasons,
activation). Reads go through ``controlplane.planning.selectors``, writes through its services
(the same as the API), so the pages cannot bypass the one-active / version invariants. Anyone
logged in may look; only operators see the create form and the activate button, and the server
refuses other scopes' writes with 403 anyway.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from controlplane.accounts.models import Scope
from controlplane.accounts.selectors import user_scope
from controlplane.core.exceptions import DomainError
from controlplane.planning import selectors, services
from controlplane.planning.models import Plan, WorkloadProfile
from frontend import plan_verdict
from frontend.access import operator_page


class PlanForm(forms.Form):
    """Choose a scenario fixture (sites, chips, limits, SLA) and optionally a stored workload."""

    scenario = forms.ChoiceField(choices=[])
    workload = forms.ModelChoiceField(
        queryset=WorkloadProfile.objects.none(), required=False, empty_label="the scenario's own"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scenario = self.fields["scenario"]
        assert isinstance(scenario, forms.ChoiceField)
        scenario.choices = [(n, n) for n in selectors.scenario_names()]
        self.fields["workload"].queryset = selectors.workload_list()  # type: ignore[attr-defined]


def _is_operator(request: HttpRequest) -> bool:
    return user_scope(request.user) == Scope.OPERATOR.value


@operator_page
def plan_list(request: HttpRequest) -> HttpResponse:
    form = PlanForm(request.POST or None)
    if request.method == "POST":
        if not _is_operator(request):
            raise PermissionDenied("Only operators request plans.")
        if form.is_valid():
            plan = services.plan_request(
                scenario=form.cleaned_data["scenario"],
                workload=form.cleaned_data["workload"],
                requested_by=request.user.get_username(),
            )
            messages.success(request, f"Plan {plan.pk} queued.")
            return redirect("plan-page", pk=plan.pk)
    plans = selectors.plan_list()[:100]
    return render(
        request,
        "frontend/plans/list.html",
        {"plans": plans, "form": form, "can_edit": _is_operator(request)},
    )


def bathtub_figure(result: dict[str, Any]) -> dict[str, Any]:
    """The initial Plotly figure of the bathtub, built on the server from the plan's JSON."""
    tub = result["bathtub"]
    points = tub["points"]
    hits = [p["hit_rate"] * 100 for p in points]
    valley = tub.get("valley") or {}
    current = tub["current"]
    data: list[dict[str, Any]] = [
        {"x": hits, "y": [p["revenue_per_cost"] for p in points], "name": "this deployment",
         "type": "scatter", "mode": "lines+markers"},
        {"x": hits, "y": [p.get("resized_revenue_per_cost") for p in points],
         "name": "re-sized for each hit rate", "type": "scatter", "mode": "lines+markers",
         "line": {"dash": "dot"}},
        {"x": [current["hit_rate"] * 100], "y": [current["revenue_per_cost"]],
         "name": "current workload", "type": "scatter", "mode": "markers",
         "marker": {"size": 14, "symbol": "star"}},
    ]  # fmt: skip
    if valley:
        y = valley.get("resized_revenue_per_cost") or valley["revenue_per_cost"]
        data.append(
            {"x": [valley["hit_rate"] * 100], "y": [y], "name": "valley", "type": "scatter",
             "mode": "markers", "marker": {"size": 12, "symbol": "triangle-down"}}
        )  # fmt: skip
    layout = {
        "margin": {"l": 50, "r": 10, "t": 10, "b": 40},
        "xaxis": {"title": {"text": "mean prefix hit rate (%)"}},
        "yaxis": {"title": {"text": "revenue per cost"}},
        "legend": {"orientation": "h"},
    }
    return {"data": data, "layout": layout}


@operator_page
def plan_detail(request: HttpRequest, pk: int) -> HttpResponse:
    plan = get_object_or_404(selectors.plan_list(), pk=pk)
    result = plan.result or {}
    context: dict[str, Any] = {
        "plan": plan,
        "result": result,
        "can_activate": _is_operator(request) and plan.activatable,
        "figure": bathtub_figure(result) if result.get("feasible") else None,
        "predicted_rows": _predicted_rows(result) if result.get("feasible") else [],
        "routing_json": json.dumps(result.get("routing_table"), indent=2),
        "shortfalls": plan_verdict.shortfalls(result) if result.get("feasible") else [],
    }
    return render(request, "frontend/plans/detail.html", context)


def _predicted_rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    mine = result["predicted"]
    theirs = (result.get("baseline") or {}).get("predicted") or {}
    rows = []
    for key, label, scale, fmt in (
        ("ttft_p50", "TTFT P50 (s)", 1.0, "{:.3f}"),
        ("ttft_p90", "TTFT P90 (s)", 1.0, "{:.3f}"),
        ("ttft_p99", "TTFT P99 (s)", 1.0, "{:.3f}"),
        ("tpot_p50", "TPOT P50 (ms)", 1e3, "{:.1f}"),
        ("tpot_p90", "TPOT P90 (ms)", 1e3, "{:.1f}"),
        ("tpot_p99", "TPOT P99 (ms)", 1e3, "{:.1f}"),
        ("goodput_rps", "goodput (req/s)", 1.0, "{:.3f}"),
        ("cost_per_hour", "cost ($/h)", 1.0, "{:.1f}"),
        ("bcr", "BCR x1000 (req/s per $/h)", 1e3, "{:.2f}"),
        ("bcr_revenue", "revenue / cost", 1.0, "{:.3f}"),
        ("sla_met", "SLA met (simulator)", 1.0, "{}"),
    ):
        cells = []
        for source in (mine, theirs):
            value = source.get(key)
            if value is None:
                cells.append("-")
            elif isinstance(value, bool):
                cells.append("yes" if value else "no")
            else:
                cells.append(fmt.format(value * scale))
        rows.append((label, cells[0], cells[1]))
    return rows


@operator_page
@require_POST
def plan_activate(request: HttpRequest, pk: int) -> HttpResponse:
    if not _is_operator(request):
        raise PermissionDenied("Only operators activate plans.")
    plan: Plan = get_object_or_404(Plan, pk=pk)
    try:
        plan = services.plan_activate(plan=plan, activated_by=request.user.get_username())
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Plan {plan.pk} is active as config version {plan.version}.")
    return redirect("plan-page", pk=pk)
