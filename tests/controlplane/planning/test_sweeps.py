"""Capacity sweeps over REST with in-process (eager) Celery: create, poll, the table, errors."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.planning.models import Sweep
from controlplane.planning.selectors import SCENARIO_DIR
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/sweeps/"


def _create(client: Any, **body: Any) -> Any:
    payload = {"scenarios": ["small.toml"], "policies": ["same-dc"], "capacity_iterations": 1}
    return client.post(URL, {**payload, **body}, format="json")


def test_operator_sweeps_two_bandwidths_and_gets_one_table(operator: Any) -> None:
    from pdd_core.scenario import load_scenario
    from pdd_core.sweep import SweepPoint, run_point

    created = _create(operator, policies=["pdd", "naive-cross-dc"], wan_gbps=[10, 40])
    assert created.status_code == 202
    sweep_id = created.json()["id"]
    assert created.json()["url"] == f"{URL}{sweep_id}/"
    assert created.json()["status"] == "queued"

    factories.sweep_finished(sweep_id)
    body = operator.get(f"{URL}{sweep_id}/").json()
    assert body["status"] == "done", body["error"]
    assert (body["points"], body["done_points"], body["progress"]) == (4, 4, 100)
    assert [(p["wan_gbps"], p["policy"]) for p in body["request"]["points"]] == [
        (10.0, "pdd"), (10.0, "naive-cross-dc"), (40.0, "pdd"), (40.0, "naive-cross-dc"),
    ]  # fmt: skip
    rows = body["rows"]
    assert [(r["wan_gbps"], r["policy"]) for r in rows] == [
        (p["wan_gbps"], p["policy"]) for p in body["request"]["points"]
    ]
    assert set(rows[0]) >= {"goodput_rps", "capacity_rps", "bcr", "sla_met", "cost_per_hour"}
    # The worker's row is pdd_core's row for that point (no second implementation).
    scenario = load_scenario(SCENARIO_DIR / "small.toml")
    expected = run_point(scenario, SweepPoint("small.toml", "pdd", 10.0), iterations=1)
    assert rows[0] == expected.to_dict()
    assert body["requested_by"].startswith("token:operator-")


def test_policies_default_to_all_four(operator: Any) -> None:
    sweep_id = operator.post(
        URL, {"scenarios": ["small.toml"], "capacity_iterations": 0}, format="json"
    ).json()["id"]
    sweep = factories.sweep_finished(sweep_id)
    assert [r["policy"] for r in sweep.rows] == ["colocated", "same-dc", "naive-cross-dc", "pdd"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"scenarios": ["nope.toml"]}, "scenarios", "not a valid choice"),
        ({"scenarios": []}, "scenarios", "at least 1"),
        ({"policies": ["fastest"]}, "policies", "not a valid choice"),
        ({"wan_gbps": [0]}, "wan_gbps", "greater than or equal to 0.001"),
        ({"wan_gbps": ["fast"]}, "wan_gbps", "valid number"),
        ({"wan_gbps": [10, 10]}, "wan_gbps", "lists a value twice"),
        ({"policies": ["pdd", "pdd"]}, "policies", "lists a value twice"),
        ({"capacity_iterations": 99}, "capacity_iterations", "less than or equal to 8"),
        (
            {
                "wan_gbps": list(range(1, 18)),
                "policies": ["pdd", "same-dc", "colocated", "naive-cross-dc"],
            },
            "non_field_errors",
            "68 points; a sweep may have at most 64.",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    operator: Any, body: dict[str, Any], field: str, message: str
) -> None:
    response = _create(operator, **body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in error["fields"], error
    assert message in str(error["fields"][field])
    assert Sweep.objects.count() == 0


def test_a_wan_bandwidth_for_a_scenario_without_wan_is_a_400(
    operator: Any, monkeypatch: Any, tmp_path: Any
) -> None:
    from controlplane.planning import selectors, sweep_services

    text = (selectors.SCENARIO_DIR / "small.toml").read_text()
    start = text.index('[[links]]\nid = "dc-a-dc-b"')
    end = text.index("[[pools]]")
    head, pools = text[:start], text[end:]
    # one site's deployment: no WAN, every pool in dc-a
    (tmp_path / "local.toml").write_text(head + pools.replace('site = "dc-b"', 'site = "dc-a"'))
    monkeypatch.setattr(selectors, "SCENARIO_DIR", tmp_path)
    monkeypatch.setattr(sweep_services, "SCENARIO_DIR", tmp_path)
    response = _create(operator, scenarios=["local.toml"], wan_gbps=[10])
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["wan_gbps"] == [
        "Scenario 'local.toml' has no WAN link to set."
    ]
    assert Sweep.objects.count() == 0


@pytest.mark.parametrize(
    ("persona", "method", "expected"),
    [
        ("viewer", "post", 403),
        ("agent", "post", 403),
        ("billing_client", "post", 403),
        ("anonymous", "post", 401),
        ("agent", "get", 403),
        ("billing_client", "get", 403),
        ("anonymous", "get", 401),
        ("viewer", "get", 200),
    ],
)
def test_only_operators_create_and_operators_or_viewers_read(
    request: Any, persona: str, method: str, expected: int
) -> None:
    client = request.getfixturevalue(persona)
    response = _create(client) if method == "post" else client.get(URL)
    assert response.status_code == expected
    assert Sweep.objects.count() == 0


def test_viewer_polls_an_operators_sweep(operator: Any, viewer: Any) -> None:
    sweep_id = _create(operator, capacity_iterations=0).json()["id"]
    factories.sweep_finished(sweep_id)
    listed = viewer.get(URL).json()
    assert [s["id"] for s in listed["results"]] == [sweep_id]
    assert viewer.get(f"{URL}{sweep_id}/").json()["status"] == "done"


def test_a_failing_point_leaves_a_readable_error(operator: Any, monkeypatch: Any) -> None:
    from controlplane.planning import tasks

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the simulator exploded")

    monkeypatch.setattr(tasks, "run_point", boom)
    sweep_id = _create(operator).json()["id"]
    sweep = factories.sweep_finished(sweep_id)
    body = operator.get(f"{URL}{sweep_id}/").json()
    assert sweep.status == "failed"
    assert body["status"] == "failed"
    assert "RuntimeError: the simulator exploded" in body["error"]
    assert body["rows"] is None


def test_a_failure_storing_the_table_fails_the_sweep(operator: Any, monkeypatch: Any) -> None:
    """A worker's chord callback that cannot store the table leaves the sweep failed with a
    readable error, never "running" for ever."""
    from controlplane.planning import sweep_services, tasks
    from controlplane.planning.models import PlanStatus

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the database went away")

    sweep_id = _create(operator, capacity_iterations=0).json()["id"]
    rows = factories.sweep_finished(sweep_id).rows
    Sweep.objects.filter(pk=sweep_id).update(status=PlanStatus.RUNNING)  # the callback's moment
    monkeypatch.setattr(sweep_services, "sweep_finished", boom)
    assert tasks.sweep_finish_task(rows, sweep_id) == "failed"
    body = operator.get(f"{URL}{sweep_id}/").json()
    assert body["status"] == "failed"
    assert "RuntimeError: the database went away" in body["error"]


def test_rerunning_a_done_sweep_does_nothing(operator: Any) -> None:
    from controlplane.planning.tasks import sweep_finish_task, sweep_run_task

    sweep_id = _create(operator, capacity_iterations=0).json()["id"]
    before = factories.sweep_finished(sweep_id)
    assert before.status == "done"
    assert sweep_run_task(sweep_id) == "skipped"
    assert sweep_finish_task([None], sweep_id) == "skipped"
    after = Sweep.objects.get(pk=sweep_id)
    assert (after.rows, after.finished_at) == (before.rows, before.finished_at)


def test_sweep_list_queries_are_bounded(operator: Any, django_assert_max_num_queries: Any) -> None:
    for _ in range(3):
        Sweep.objects.create(inputs={"points": [], "iterations": 0})
    with django_assert_max_num_queries(6):
        response = operator.get(URL)
    assert response.json()["count"] == 3
