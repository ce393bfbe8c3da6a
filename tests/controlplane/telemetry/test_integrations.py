"""Telemetry reads the active plan and the agent registry through the typed readers that the
planning and agents apps hand it at start-up: no guessing of names, no swallowed errors."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.agents.models import Agent
from controlplane.planning.models import Plan
from controlplane.telemetry import integrations
from tests import factories

pytestmark = pytest.mark.django_db


def test_without_an_active_plan_there_is_none() -> None:
    Plan.objects.create(scenario="small.toml", status="done", result={"predicted": {"bcr": 2}})

    assert integrations.active_plan() is None


def test_the_active_plan_comes_with_its_version_model_predictions_and_pools() -> None:
    pool = {"site": "dc-a", "chip": "h800", "role": "P", "instances": 2, "tp": 8}
    Plan.objects.create(
        scenario="small.toml", status="done", version=3, active=True,
        activated_at=timezone.now(),
        result={"model": "deepseek-v3", "predicted": {"bcr": 2.5, "goodput_rps": 40.0},
                "pools": [pool]},
    )  # fmt: skip

    plan = integrations.active_plan()

    assert plan == integrations.ActivePlan(
        version=3, model="deepseek-v3", predicted={"bcr": 2.5, "goodput_rps": 40.0},
        predicted_bcr=2.5, pools=(pool,),
    )  # fmt: skip


def test_agents_are_listed_with_their_health() -> None:
    site = factories.site(slug="dc-a")
    now = timezone.now()
    Agent.objects.create(name="gw-0", site=site, role="gateway", last_heartbeat_at=now,
                         registered_at=now, address="127.0.0.1:8001",
                         stats={"records_rejected": 4})  # fmt: skip
    Agent.objects.create(name="md-0", site=site, role="main", config_version=2, registered_at=now,
                         restarts=3, state="draining", pool="main/h20/tp8")  # fmt: skip

    rows = integrations.agents()

    assert rows == [
        {"name": "gw-0", "role": "gateway", "site": "dc-a", "healthy": True,
         "status": "healthy", "config_version": None, "address": "127.0.0.1:8001",
         "registered_at": now, "last_heartbeat_at": now, "restarts": 0, "records_rejected": 4,
         "state": "", "pool": ""},
        {"name": "md-0", "role": "main", "site": "dc-a", "healthy": False,
         "status": "dead", "config_version": 2, "address": "", "registered_at": now,
         "last_heartbeat_at": None, "restarts": 3, "records_rejected": None,
         "state": "draining", "pool": "main/h20/tp8"},
    ]  # fmt: skip
    assert integrations.agents_up() == 1


def test_a_readers_error_is_not_hidden() -> None:
    from controlplane.planning.selectors import active_plan_summary

    def broken() -> None:
        raise LookupError("a bug in the planning app")

    integrations.provide_active_plan(broken)
    try:
        with pytest.raises(LookupError, match="a bug in the planning app"):
            integrations.active_plan()
    finally:
        integrations.provide_active_plan(active_plan_summary)
