"""Planning routes on the project's one router, plus the active configuration path."""

from django.urls import path

from controlplane.planning.api import views

ROUTES = (
    ("plans", views.PlanViewSet, "plan"),
    ("workloads", views.WorkloadViewSet, "workload"),
    ("sweeps", views.SweepViewSet, "sweep"),
)
URLS = [path("config/active/", views.ActiveConfigView.as_view(), name="config-active")]
