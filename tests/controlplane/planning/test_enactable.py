"""The control plane plans for the plane it runs: its plans recommend only designs of families
its agents enact (disaggregated roles), while every family is still searched and compared."""

from __future__ import annotations

import pytest

from controlplane.planning.models import Plan
from controlplane.planning.selectors import SCENARIO_DIR
from controlplane.planning.services import planner_inputs
from pdd_core.agent.desired import not_enacted_reason
from pdd_core.planner.design import FAMILIES

pytestmark = pytest.mark.django_db


def _plan(toml: str) -> Plan:
    inputs = {"scenario": "small.toml", "scenario_toml": toml}
    return Plan.objects.create(scenario="small.toml", inputs=inputs)


def test_a_plan_recommends_only_the_families_this_plane_enacts() -> None:
    inputs = planner_inputs(_plan((SCENARIO_DIR / "small.toml").read_text()))

    assert inputs.settings.recommend == tuple(f for f in FAMILIES if f != "colocated")
    assert all(not_enacted_reason(f) is None for f in inputs.settings.recommend)
    assert not_enacted_reason("colocated") is not None


def test_a_scenario_that_narrows_the_families_keeps_its_choice() -> None:
    toml = (SCENARIO_DIR / "small.toml").read_text()
    assert "[planner]" not in toml
    narrowed = toml + '\n[planner]\nrecommend = ["pdd", "colocated"]\n'
    assert planner_inputs(_plan(narrowed)).settings.recommend == ("pdd",)
