"""A plan computed by a real ``celery -A controlplane worker`` on Redis reaches done.

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
