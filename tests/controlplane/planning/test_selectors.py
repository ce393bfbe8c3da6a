"""``active_config``: what the agents are told to run carries each pool's whole instance shape."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.planning.models import Plan, PlanStatus
from controlplane.planning.selectors import active_config

pytestmark = pytest.mark.django_db

P_POOL = {"site": "dc-a", "chip": "h800", "role": "P", "instances": 2, "tp": 8, "pp": 2,
          "dp": 1, "ep": 1, "cost_per_hour": 64.0, "reason": "prefill"}  # fmt: skip
MD_POOL = {"site": "dc-b", "chip": "h20", "role": "MD", "instances": 1, "tp": 4, "pp": 1,
           "dp": 2, "ep": 8, "cost_per_hour": 16.0, "reason": "decode"}  # fmt: skip


def _activate(pools: list[dict[str, object]]) -> Plan:
    return Plan.objects.create(
        scenario="small.toml",
        inputs={},
        status=PlanStatus.DONE,
        result={"model": "deepseek-v3", "routing_table": {}, "pools": pools},
        version=7,
        active=True,
        activated_at=timezone.now(),
    )


def test_active_config_passes_tp_pp_dp_and_ep_of_every_pool() -> None:
    _activate([P_POOL, MD_POOL])

    config = active_config()

    assert config is not None
    assert config["pools"] == [
        {"site": "dc-a", "chip": "h800", "role": "P", "instances": 2, "tp": 8, "pp": 2, "dp": 1,
         "ep": 1},
        {"site": "dc-b", "chip": "h20", "role": "MD", "instances": 1, "tp": 4, "pp": 1, "dp": 2,
         "ep": 8},
    ]  # fmt: skip


def test_a_plan_stored_before_shapes_had_pp_reads_as_one_stage() -> None:
    old = {k: v for k, v in MD_POOL.items() if k not in ("pp", "dp", "ep")}
    _activate([old])

    config = active_config()

    assert config is not None
    assert config["pools"] == [
        {"site": "dc-b", "chip": "h20", "role": "MD", "instances": 1, "tp": 4, "pp": 1, "dp": 1,
         "ep": 1}
    ]  # fmt: skip
