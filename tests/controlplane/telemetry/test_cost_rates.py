"""``telemetry.selectors.cost_rates``: the deployment's hardware cost per hour is priced by
``pdd_core.specs.pool_cost_per_hour`` (whole nodes), the rule the planner prices designs with."""

from __future__ import annotations

import pytest

from controlplane.inventory.selectors import topology_snapshot
from controlplane.planning.models import Plan, PlanStatus
from controlplane.planning.services import plan_activate
from controlplane.telemetry.selectors import cost_rates
from tests import factories

pytestmark = pytest.mark.django_db


def test_the_inventorys_cost_is_the_topologys_cost_in_whole_nodes() -> None:
    dc_a, dc_b = factories.site(slug="dc-a"), factories.site(slug="dc-b")
    chip = factories.chip(price_per_hour="3.0000", chips_per_node=8)
    # 3 instances of 2 chips: 6 chips, one 8-chip node, $24/h (not 6 x $3)
    factories.pool(site=dc_a, chip=chip, role="P", chips_per_instance=2, instance_count=3)
    # 3 instances of 4 chips: 12 chips, two nodes, $48/h
    factories.pool(site=dc_b, chip=chip, role="MD", chips_per_instance=4, instance_count=3)

    rates = cost_rates()

    assert rates["all"] == topology_snapshot().cost_per_hour() == 72.0
    assert rates["site"] == {"dc-a": 24.0, "dc-b": 48.0}
    assert rates["pool"] == {"P-MD": 72.0, "P-RLD-MD": 72.0, "P-RLD": 24.0}


def test_the_active_plans_pools_count_pipeline_stages_and_whole_nodes() -> None:
    factories.chip(slug="h800", price_per_hour="2.0000", chips_per_node=8)
    pools = [
        # tp4 x pp2 = 8 chips an instance, 3 instances: 3 nodes, $48/h
        {"site": "dc-a", "chip": "h800", "role": "P", "instances": 3, "tp": 4, "pp": 2},
        # tp2: 2 chips, one node, $16/h
        {"site": "dc-a", "chip": "h800", "role": "RLD", "instances": 1, "tp": 2},
        # a chip the catalog lacks costs nothing
        {"site": "dc-b", "chip": "unknown", "role": "MD", "instances": 1, "tp": 8},
    ]
    plan = Plan.objects.create(
        scenario="small.toml", inputs={}, status=PlanStatus.DONE,
        result={"feasible": True, "model": "model-x", "pools": pools},
    )  # fmt: skip
    plan_activate(plan=plan)

    rates = cost_rates()

    assert rates["all"] == 64.0
    assert rates["site"] == {"dc-a": 64.0, "dc-b": 0.0}
    assert rates["pool"] == {"P-MD": 48.0, "P-RLD-MD": 64.0, "P-RLD": 64.0}


def test_the_plans_pools_are_priced_at_the_instances_that_run() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.agents.models import Agent

    dc_a, dc_b = factories.site(slug="dc-a"), factories.site(slug="dc-b")
    factories.chip(slug="h800", price_per_hour="2.0000", chips_per_node=8)
    pools = [
        # tp4 x pp2: 8 chips (one node, $16/h) an instance
        {"site": "dc-a", "chip": "h800", "role": "P", "instances": 3, "tp": 4, "pp": 2},
        {"site": "dc-b", "chip": "h800", "role": "MD", "instances": 1, "tp": 8},
    ]
    plan = Plan.objects.create(
        scenario="small.toml", inputs={}, status=PlanStatus.DONE,
        result={"feasible": True, "model": "model-x", "pools": pools},
    )  # fmt: skip
    plan_activate(plan=plan)
    now, long_ago = timezone.now(), timezone.now() - timedelta(hours=1)
    for name, site, role, state, pool, beat in (
        ("p-0", dc_a, "prefill", "serving", "prefill/h800/tp4xpp2", now),
        ("p-1", dc_a, "prefill", "", "", now),  # an older agent: no state, counts
        ("p-2", dc_a, "prefill", "starting", "prefill/h800/tp4xpp2", now),  # not yet serving
        ("p-3", dc_a, "prefill", "serving", "prefill/h800/tp8", now),  # another pool's
        ("md-0", dc_b, "main", "serving", "main/h800/tp8", long_ago),  # dead
    ):
        Agent.objects.create(name=name, site=site, role=role, state=state, pool=pool,
                             last_heartbeat_at=beat)  # fmt: skip

    rates = cost_rates()

    assert rates["site"] == {"dc-a": 32.0, "dc-b": 0.0}
    assert rates["all"] == 32.0
