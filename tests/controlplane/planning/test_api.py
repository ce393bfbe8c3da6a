"""The planning REST flow with in-process (eager) Celery: create, poll, activate, config."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from controlplane.planning.models import Plan, PlanStatus
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _create(client: Any, **body: Any) -> Any:
    return client.post("/api/v1/plans/", {"scenario": "small.toml", **body}, format="json")


def test_operator_creates_polls_and_activates_a_plan(operator: Any, agent: Any) -> None:
    created = _create(operator)
    assert created.status_code == 202
    plan_id = created.json()["id"]
    assert created.json()["url"] == f"/api/v1/plans/{plan_id}/"

    factories.plan_finished(plan_id)
    polled = operator.get(f"/api/v1/plans/{plan_id}/").json()
    assert polled["status"] == "done"
    assert polled["progress"] == 100
    result = polled["result"]
    assert result["feasible"] is True
    assert set(result) >= {"pools", "routing_table", "predicted", "baseline", "bathtub", "reasons"}
    assert result["predicted"]["source"] == "simulator"
    roles = {p["role"] for p in result["pools"]}
    # RLD is its own pool or time-shared on P; an aggregated plan has one mixed pool (role P).
    assert "P" in roles
    assert "MD" in roles or result["policy"] == "colocated"
    assert roles <= {"P", "RLD", "MD"}

    activated = operator.post(f"/api/v1/plans/{plan_id}/activate/")
    assert activated.status_code == 200
    assert activated.json()["version"] == 1
    assert activated.json()["active"] is True

    config = agent.get("/api/v1/config/active/")
    assert config.status_code == 200
    body = config.json()
    assert body["version"] == 1
    assert body["plan"] == plan_id
    assert body["routing_table"] == result["routing_table"]
    assert [p["role"] for p in body["pools"]] == [p["role"] for p in result["pools"]]


def test_activating_a_second_plan_archives_the_first_and_bumps_the_version(
    operator: Any,
) -> None:
    first = _create(operator).json()["id"]
    second = _create(operator).json()["id"]
    factories.plan_finished(first)
    factories.plan_finished(second)
    assert operator.post(f"/api/v1/plans/{first}/activate/").json()["version"] == 1
    assert operator.post(f"/api/v1/plans/{second}/activate/").json()["version"] == 2
    old = Plan.objects.get(pk=first)
    assert old.active is False
    assert old.archived_at is not None
    assert Plan.objects.filter(active=True).count() == 1
    again = operator.post(f"/api/v1/plans/{first}/activate/")
    assert again.json()["version"] == 3


def test_viewer_cannot_activate(operator: Any, viewer: Any) -> None:
    plan_id = _create(operator).json()["id"]
    factories.plan_finished(plan_id)
    assert viewer.get(f"/api/v1/plans/{plan_id}/").status_code == 200
    response = viewer.post(f"/api/v1/plans/{plan_id}/activate/")
    assert response.status_code == 403
    assert response.json()["error"]["status"] == 403
    assert Plan.objects.get(pk=plan_id).active is False
    assert viewer.get("/api/v1/config/active/").status_code == 404


def test_viewer_cannot_create_a_plan(viewer: Any) -> None:
    assert _create(viewer).status_code == 403
    assert Plan.objects.count() == 0


def test_an_unfinished_or_failed_plan_cannot_be_activated(operator: Any) -> None:
    queued = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.QUEUED)
    failed = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.FAILED)
    for plan in (queued, failed):
        response = operator.post(f"/api/v1/plans/{plan.pk}/activate/")
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "conflict"
    assert not Plan.objects.filter(active=True).exists()


def test_bad_input_is_a_400_in_the_envelope(operator: Any) -> None:
    response = _create(operator, scenario="nope.toml")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == 400
    assert "scenario" in error["fields"]
    assert Plan.objects.count() == 0


def test_agents_billing_and_anonymous_are_refused_plans(
    agent: Any, billing_client: Any, anonymous: Any
) -> None:
    assert agent.get("/api/v1/plans/").status_code == 403
    assert billing_client.get("/api/v1/config/active/").status_code == 403
    assert anonymous.get("/api/v1/config/active/").status_code == 401


def test_a_failing_job_leaves_a_readable_error(operator: Any, monkeypatch: Any) -> None:
    from controlplane.planning import tasks

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the search exploded")

    monkeypatch.setattr(tasks, "prepare", boom)
    plan_id = _create(operator).json()["id"]
    factories.plan_finished(plan_id)
    plan = operator.get(f"/api/v1/plans/{plan_id}/").json()
    assert plan["status"] == "failed"
    assert "RuntimeError: the search exploded" in plan["error"]
    assert operator.post(f"/api/v1/plans/{plan_id}/activate/").status_code == 409


def test_the_request_answers_202_while_the_job_is_still_running(
    operator: Any, monkeypatch: Any
) -> None:
    import threading

    from controlplane.planning import tasks

    release = threading.Event()
    real_prepare = tasks.prepare

    def held(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(timeout=120)
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(tasks, "prepare", held)
    created = _create(operator)
    # The background thread marks the plan running a moment after the 202; the job itself is
    # held, so the plan can only be seen queued, then running, until it is released.
    deadline = time.monotonic() + 60
    while_held = "queued"
    while while_held == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
        while_held = operator.get(f"/api/v1/plans/{created.json()['id']}/").json()["status"]
    release.set()
    plan = factories.plan_finished(created.json()["id"])

    assert (created.status_code, created.json()["status"]) == (202, "queued")
    assert while_held == "running"
    assert plan.status == PlanStatus.DONE


def test_rerunning_a_done_plan_does_nothing(operator: Any) -> None:
    from controlplane.planning.tasks import plan_compute_task

    plan_id = _create(operator).json()["id"]
    before = factories.plan_finished(plan_id)
    assert plan_compute_task(plan_id) == "skipped"
    after = Plan.objects.get(pk=plan_id)
    assert after.result == before.result
    assert after.finished_at == before.finished_at


def test_an_infeasible_sla_finishes_with_an_explanation(
    operator: Any, monkeypatch: Any, tmp_path: Any
) -> None:
    from controlplane.planning import selectors, services

    text = (
        (selectors.SCENARIO_DIR / "small.toml")
        .read_text()
        .replace("ttft_p90_s = 2.0\nttft_p99_s = 5.0", "ttft_p90_s = 0.05\nttft_p99_s = 0.1")
    )
    (tmp_path / "small.toml").write_text(text)
    monkeypatch.setattr(selectors, "SCENARIO_DIR", tmp_path)
    monkeypatch.setattr(services, "SCENARIO_DIR", tmp_path)
    plan_id = _create(operator).json()["id"]
    factories.plan_finished(plan_id)
    plan = operator.get(f"/api/v1/plans/{plan_id}/").json()
    assert plan["status"] == "done"
    assert plan["result"]["feasible"] is False
    assert plan["result"]["explanation"].startswith("TTFT P")
    assert operator.post(f"/api/v1/plans/{plan_id}/activate/").status_code == 409


# 60 Mooncake requests 0.5 s apart; each shares its first block with the one 3 before it.
TRACE_60 = "\n".join(
    f'{{"timestamp": {i * 500}, "input_length": 4096, "output_length": 200, '
    f'"hash_ids": [{i % 3}, {100 + i}]}}'
    for i in range(60)
).encode()


def test_upload_a_trace_and_plan_for_it(operator: Any) -> None:
    upload = SimpleUploadedFile("t.jsonl", TRACE_60, "application/jsonl")
    created = operator.post(
        "/api/v1/workloads/", {"name": "mine", "file": upload}, format="multipart"
    )
    assert created.status_code == 201
    workload = created.json()
    assert workload["requests"] == 60
    assert workload["source"] == "trace"
    plan = _create(operator, workload=workload["id"]).json()
    factories.plan_finished(plan["id"])
    assert operator.get(f"/api/v1/plans/{plan['id']}/").json()["status"] == "done"


def test_an_uploaded_traces_stats_are_pdd_cores_trace_stats(operator: Any, tmp_path: Any) -> None:
    from pdd_core.workload import read_trace, trace_stats

    upload = SimpleUploadedFile("t.jsonl", TRACE_60, "application/jsonl")
    workload = operator.post(
        "/api/v1/workloads/", {"name": "mine", "file": upload}, format="multipart"
    ).json()
    (tmp_path / "t.jsonl").write_bytes(TRACE_60)
    expected = trace_stats(read_trace(tmp_path / "t.jsonl").requests, block_size=512).to_dict()
    assert workload["stats"] == expected
    # from the fourth request on, each one's first block was seen 3 requests before
    assert workload["stats"]["hit"]["token_weighted"] == pytest.approx(57 * 512 / (60 * 4096))
    assert workload["stats"]["rate_per_s"] == pytest.approx(60 / 29.5)


def test_a_bad_trace_names_its_line(operator: Any) -> None:
    body = b'{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": []}\n{"x": 1}\n'
    upload = SimpleUploadedFile("bad.jsonl", body)
    response = operator.post(
        "/api/v1/workloads/", {"name": "bad", "file": upload}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["file"][0].startswith("line 2:")


def test_a_trace_over_the_size_limit_is_refused(operator: Any, settings: Any) -> None:
    settings.WORKLOAD_MAX_BYTES = 100
    upload = SimpleUploadedFile("big.jsonl", b"x" * 200)
    response = operator.post(
        "/api/v1/workloads/", {"name": "big", "file": upload}, format="multipart"
    )
    assert response.status_code == 400
    assert "limit is 100" in response.json()["error"]["fields"]["file"][0]


def test_workload_from_a_scenario(operator: Any) -> None:
    response = operator.post(
        "/api/v1/workloads/", {"name": "s", "scenario": "small.toml"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["source"] == "scenario"
    assert response.json()["requests"] > 0


def test_workload_needs_exactly_one_source(operator: Any) -> None:
    response = operator.post("/api/v1/workloads/", {"name": "none"}, format="json")
    assert response.status_code == 400


def test_activation_broadcasts_to_config_group(operator: Any, monkeypatch: Any) -> None:
    from controlplane.planning import services

    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(services, "broadcast", lambda g, p, **kw: sent.append((g, p)) or True)
    plan_id = _create(operator).json()["id"]
    factories.plan_finished(plan_id)
    operator.post(f"/api/v1/plans/{plan_id}/activate/")
    assert sent == [("config.all", {"event": "config.activated", "version": 1, "plan": plan_id})]


def test_telemetry_rows_become_requests_that_reproduce_their_hits() -> None:
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from controlplane.planning.services import requests_from_telemetry
    from pdd_core.workload import replay_hits

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        SimpleNamespace(request_id=f"r{i}", tenant="acme", arrival_time=t0 + timedelta(seconds=i),
                        input_tokens=4096 + 1024 * i, hit_tokens=hit, output_tokens=100)
        for i, hit in enumerate([0, 4096, 5120, 1024])
    ]  # fmt: skip
    requests = requests_from_telemetry(rows)
    hits, _ = replay_hits(requests, 512, None)
    assert hits == [0, 4096, 5120, 1024]
    assert [r.arrival_s for r in requests] == [0.0, 1.0, 2.0, 3.0]


def test_telemetry_window_without_records_is_a_400(operator: Any) -> None:
    response = operator.post(
        "/api/v1/workloads/", {"name": "live", "telemetry_minutes": 30}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "minutes": ["No telemetry records in the last 30 minutes."]
    }


def test_plan_list_queries_are_bounded(operator: Any, django_assert_max_num_queries: Any) -> None:
    for _ in range(3):
        Plan.objects.create(scenario="small.toml", inputs={})
    with django_assert_max_num_queries(6):
        response = operator.get("/api/v1/plans/")
    assert response.json()["count"] == 3
