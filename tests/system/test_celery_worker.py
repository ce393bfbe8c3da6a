"""Plans and sweeps computed by a real ``celery -A controlplane worker`` on Redis reach done.

The worker is a subprocess on the test database (``DATABASE_URL`` of the test DB, as the browser
tests pass it to daphne) with ``PDD_CELERY_EAGER=0``; the test requests a plan through the
service (queued on commit to Redis) and polls the row until the worker's chord has finished it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import database_url

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.redis, pytest.mark.system, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    from django.db import connection

    from controlplane.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = False
    env = {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "PDD_CELERY_EAGER": "0",
        "PDD_DATA_DIR": str(tmp_path),
    }
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    log.close()
    app.conf.task_always_eager = before


def test_worker_computes_a_plan_to_done(worker: Any, tmp_path: Path) -> None:
    from controlplane.planning.models import Plan, PlanStatus
    from controlplane.planning.services import plan_request

    plan = plan_request(scenario="small.toml", requested_by="system-test")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        plan.refresh_from_db()
        if plan.status in (PlanStatus.DONE, PlanStatus.FAILED):
            break
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        time.sleep(0.5)
    log = (tmp_path / "worker.log").read_text()
    assert plan.status == PlanStatus.DONE, f"{plan.status}: {plan.error}\n{log[-3000:]}"
    assert plan.progress == 100
    assert plan.result is not None and plan.result["feasible"] is True
    assert "planning.plan_verify" in log  # the verifications ran as their own tasks
    assert Plan.objects.get(pk=plan.pk).started_at is not None


def test_worker_computes_a_sweep_point_by_point(worker: Any, tmp_path: Path) -> None:
    from controlplane.planning.selectors import SCENARIO_DIR
    from controlplane.planning.sweep_services import sweep_request
    from pdd_core.scenario import load_scenario
    from pdd_core.sweep import SweepPoint, run_point

    sweep = sweep_request(
        scenarios=["small.toml"],
        policies=["same-dc", "pdd"],
        wan_gbps=[20.0],
        iterations=1,
        requested_by="system-test",
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        sweep.refresh_from_db()
        if sweep.status in ("done", "failed"):
            break
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        time.sleep(0.5)
    log = (tmp_path / "worker.log").read_text()
    assert sweep.status == "done", f"{sweep.status}: {sweep.error}\n{log[-3000:]}"
    assert (sweep.points, sweep.done_points, sweep.progress) == (2, 2, 100)
    scenario = load_scenario(SCENARIO_DIR / "small.toml")
    expected = [
        run_point(scenario, SweepPoint("small.toml", policy, 20.0), iterations=1).to_dict()
        for policy in ("same-dc", "pdd")
    ]
    assert sweep.rows == expected
    assert log.count("planning.sweep_point") >= 2  # each point ran as its own task
    assert "planning.sweep_finish" in log


def test_worker_runs_a_fleet_phase_as_a_group(worker: Any, tmp_path: Path) -> None:
    import tomllib

    from controlplane.planning.fleet import celery_map
    from pdd_core.fleet import serial_map
    from pdd_core.fleet.plan import day_task

    small = ROOT / "tests" / "pdd_core" / "fleet" / "small_fleet.toml"
    with small.open("rb") as fh:
        tables = tomllib.load(fh)
    calls = [(tables, "t1"), (tables, "t2")]
    there = celery_map(day_task, calls)
    here = serial_map(day_task, calls)
    assert [r["requests_per_hour"] for r in there] == [r["requests_per_hour"] for r in here]
    assert {r["pid"] for r in there} == {worker.pid}  # computed by the worker, not here
    assert "planning.fleet_part" in (tmp_path / "worker.log").read_text()
