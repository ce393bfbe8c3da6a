"""``pdd_core.planner.drift``: each figure judged against its stated tolerance, and the live
workload's place on a plan's bathtub."""

from __future__ import annotations

import pytest

from pdd_core.planner.drift import WorkloadFigures, bathtub_position, checks

PLANNED = WorkloadFigures(rate_rps=10.0, mean_hit=0.5, mean_input_tokens=2000.0,
                          mean_output_tokens=200.0)  # fmt: skip


def _verdicts(live: WorkloadFigures) -> dict[str, bool | None]:
    return {c.field: c.drifted for c in checks(PLANNED, live)}


def test_within_every_tolerance_nothing_drifts() -> None:
    live = WorkloadFigures(12.4, 0.59, 1510.0, 249.0)

    assert _verdicts(live) == {"mean_hit": False, "rate_rps": False, "mean_input_tokens": False,
                               "mean_output_tokens": False}  # fmt: skip


@pytest.mark.parametrize(
    ("live", "field"),
    [
        (WorkloadFigures(10.0, 0.61, 2000.0, 200.0), "mean_hit"),  # +0.11 absolute
        (WorkloadFigures(10.0, 0.39, 2000.0, 200.0), "mean_hit"),
        (WorkloadFigures(12.6, 0.5, 2000.0, 200.0), "rate_rps"),  # +26 %
        (WorkloadFigures(7.4, 0.5, 2000.0, 200.0), "rate_rps"),  # -26 %
        (WorkloadFigures(10.0, 0.5, 2600.0, 200.0), "mean_input_tokens"),
        (WorkloadFigures(10.0, 0.5, 2000.0, 140.0), "mean_output_tokens"),
    ],
)
def test_one_figure_beyond_its_tolerance_drifts_alone(live: WorkloadFigures, field: str) -> None:
    verdicts = _verdicts(live)

    assert [f for f, drifted in verdicts.items() if drifted] == [field]


def test_a_figure_the_plan_did_not_record_is_not_judged() -> None:
    old_plan = WorkloadFigures.of_plan({"rate_rps": 10.0, "mean_hit": 0.5})

    found = {c.field: (c.planned, c.drifted) for c in checks(old_plan, PLANNED)}

    assert found["mean_input_tokens"] == (None, None)
    assert found["rate_rps"] == (10.0, False)


BATHTUB = {"points": [
    {"hit_rate": 0.0, "goodput_rps": 4.0, "revenue_per_cost": 1.0},
    {"hit_rate": 0.5, "goodput_rps": 8.0, "revenue_per_cost": 3.0},
    {"hit_rate": 1.0, "goodput_rps": 12.0, "revenue_per_cost": 2.0},
]}  # fmt: skip


def test_the_live_point_sits_on_the_curve_between_its_grid_points() -> None:
    position = bathtub_position(BATHTUB, live_hit=0.25, live_rate=3.0)

    # halfway between 0 and 0.5: revenue per cost 2.0, SLA goodput 6 req/s, so load 0.5
    assert position == {"hit_rate": 0.25, "revenue_per_cost": 2.0, "load": 0.5}


def test_no_curve_or_no_live_hit_gives_no_position() -> None:
    assert bathtub_position(None, 0.3, 1.0) is None
    assert bathtub_position(BATHTUB, None, 1.0) is None
