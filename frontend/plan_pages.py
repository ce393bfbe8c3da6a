"""Plan pages: the list with a create form, and one plan (pools, cost table, bathtub, reasons,
activation). Reads go through ``controlplane.planning.selectors``, writes through its services
(the same as the API), so the pages cannot bypass the one-active / version invariants. Anyone
logged in may look; only operators see the create form and the activate button, and the server
refuses other scopes' writes with 403 anyway.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from controlplane.accounts.models import Scope
from controlplane.accounts.selectors import user_scope
from controlplane.agents.desired import active_plan_not_enacted, pool_rollouts
from controlplane.agents.selectors import agent_list
from controlplane.core.exceptions import DomainError
from controlplane.inventory.selectors import site_list
from controlplane.planning import selectors, services
from controlplane.planning.drift import LIVE_WINDOW_MIN
from controlplane.planning.jobs import job_runner
from controlplane.planning.models import Plan, WorkloadProfile
from frontend import plan_verdict, units
from frontend.access import operator_page
from pdd_core.routing import RoutingTable


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
        {"plans": plans, "form": form, "can_edit": _is_operator(request), "runner": job_runner()},
    )


def bathtub_figure(result: dict[str, Any], live: dict[str, float] | None = None) -> dict[str, Any]:
    """The initial Plotly figure of the bathtub, built on the server from the plan's JSON;
    ``live`` (``pdd_core.planner.drift.bathtub_position``) adds the live workload's point."""
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
    if live and "revenue_per_cost" in live:
        load = f", load {live['load']:.0%} of the SLA rate there" if "load" in live else ""
        data.append(
            {"x": [live["hit_rate"] * 100], "y": [live["revenue_per_cost"]],
             "name": f"live now (hit {live['hit_rate']:.0%}{load})", "type": "scatter",
             "mode": "markers", "marker": {"size": 16, "symbol": "diamond", "color": "#b3261e"}}
        )  # fmt: skip
    layout = {
        "margin": {"l": 50, "r": 10, "t": 10, "b": 40},
        "xaxis": {"title": {"text": "mean prefix hit rate (%)", "standoff": 4}},
        "yaxis": {"title": {"text": "revenue per cost"}},
        "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"},
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
        "routing_rows": routing_rows(result.get("routing_table")),
        "shortfalls": plan_verdict.shortfalls(result) if result.get("feasible") else [],
        "verdict": plan_verdict.planner_verdict(result) if result.get("feasible") else None,
        "rollout": pool_rollouts(list(site_list()), list(agent_list())) if plan.active else [],
        "not_enacted": _not_enacted(plan.active),
    }
    return render(request, "frontend/plans/detail.html", context)


def _not_enacted(active: bool) -> str | None:
    reason = active_plan_not_enacted() if active else None
    return None if reason is None else plan_verdict.not_enacted_sentence(reason)


# What each threshold of ``pdd_core.routing.RoutingTable`` decides, for the plan page: a label,
# how to print the value, and the rule in words (the class docstring's, shortened).
ROUTING_FIELDS: dict[str, tuple[str, str, str]] = {
    "singular_min_input_tokens": ("Singular from", "{:,} input tokens",
                                  "a request at least this long may finish on RLD (P-RLD)"),
    "singular_max_output_tokens": ("Singular below", "{:,} output tokens",
                                   "... when its predicted output is shorter"),
    "singular_max_hit": ("Singular up to", "{:.0%} prefix hit", "... and its hit at P is at most"),
    "transfer_budget_s": ("Transfer budget", "{:g} s",
                          "P-MD when the predicted WAN transfer fits; else RLD relays (P-RLD-MD)"),
    "handoff_chunk_tokens": ("Extend chunk", "{:,} tokens", "per extend in extend-decode"),
    "extend_decode_min_tokens": ("Extend-decode above", "{:,} eager tokens",
                                 "at or below it a handoff is one step"),
    "rld_load_threshold": ("One-shot at RLD load", "{:.0%}",
                           "at or above it handoffs are one-shot, freeing RLD"),
    "early_rejection": ("Early rejection", "{}", "refuse (429) what cannot meet the SLA"),
    "reject_ttft_factor": ("Reject above", "{:g} x the TTFT P99 target", "of predicted TTFT"),
}  # fmt: skip


def routing_rows(table: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """The plan's routing table as (threshold, value, rule) rows in ``RoutingTable``'s field
    order; a key this page does not know is shown as it is."""
    if not table:
        return []
    order = [f.name for f in fields(RoutingTable)]
    keys = [k for k in order if k in table] + sorted(k for k in table if k not in order)
    rows = []
    for key in keys:
        label, fmt, rule = ROUTING_FIELDS.get(key, (key, "{}", ""))
        value = table[key]
        if isinstance(value, bool):
            text = "on" if value else "off"
        else:
            try:
                text = fmt.format(value)
            except (TypeError, ValueError):
                text = str(value)
        rows.append((label, text, rule))
    return rows


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
        ("bcr", f"BCR ({units.BCR_UNIT})", units.SECONDS_PER_HOUR, "{:.3g}"),
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


@operator_page
@require_POST
def plan_from_live(request: HttpRequest) -> HttpResponse:
    """The overview's "plan from the live window": the last ``LIVE_WINDOW_MIN`` minutes of
    telemetry as a workload, planned on the active plan's scenario (the same two services the
    API's workload and plan endpoints call)."""
    if not _is_operator(request):
        raise PermissionDenied("Only operators request plans.")
    active = selectors.active_plan()
    if active is None:
        messages.error(request, "No plan is active: choose a scenario on the plans page.")
        return redirect("plan-list")
    who = request.user.get_username()
    try:
        workload = services.workload_create_from_telemetry(
            name=f"live {LIVE_WINDOW_MIN} min", minutes=LIVE_WINDOW_MIN, created_by=who
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("home")
    plan = services.plan_request(scenario=active.scenario, workload=workload, requested_by=who)
    messages.success(request, f"Plan {plan.pk} queued from the last {LIVE_WINDOW_MIN} minutes.")
    return redirect("plan-page", pk=plan.pk)
