from django.apps import AppConfig


class PlanningConfig(AppConfig):
    """Plans: workload profiles, plans computed by the pdd_core planner in Celery jobs, and the
    versioned activation that hands the chosen routing table and pools to the data plane."""

    name = "controlplane.planning"
    label = "planning"

    def ready(self) -> None:
        from controlplane.planning import tasks  # noqa: F401  (registers the tasks queued by name)
        from controlplane.planning.selectors import active_plan_summary
        from controlplane.telemetry.integrations import provide_active_plan

        provide_active_plan(active_plan_summary)
