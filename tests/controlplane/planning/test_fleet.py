"""A fleet plan through Celery: ``manage.py plan_fleet`` sends each phase as a group (eager on
the embedded defaults), and a group returns what the tasks compute in this process."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from controlplane.planning.fleet import celery_map, fleet_part_task
from pdd_core.fleet import serial_map
from pdd_core.fleet.plan import day_task

SMALL = Path(__file__).resolve().parents[2] / "pdd_core" / "fleet" / "small_fleet.toml"


def tiny(tmp_path: Path) -> Path:
    """The small fleet at a tenth of its sessions (its plan takes seconds)."""
    text = SMALL.read_text().replace("sessions_per_day = 4000", "sessions_per_day = 400")
    text = text.replace("sessions_per_day = 2000", "sessions_per_day = 200")
    text = text.replace("slice_requests = 150", "slice_requests = 100")
    path = tmp_path / "tiny_fleet.toml"
    path.write_text(text)
    return path


def test_a_group_returns_what_the_tasks_compute_here() -> None:
    with SMALL.open("rb") as fh:
        tables: dict[str, Any] = tomllib.load(fh)
    calls = [(tables, "t1"), (tables, "t2")]
    here = [r["requests_per_hour"] for r in serial_map(day_task, calls)]
    assert [r["requests_per_hour"] for r in celery_map(day_task, calls)] == here


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="phase: one of day, screen, demand"):
        fleet_part_task("bake", [])
    with pytest.raises(ValueError, match="not a fleet planner task"):
        celery_map(print, [()])


def test_plan_fleet_plans_every_demand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("plan_fleet", str(tiny(tmp_path)), "--out", str(tmp_path / "out"))
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert [d["demand"] for d in plan["demands"]]
    assert all(d["fleet"]["sla_met"] for d in plan["demands"])
    printed = capsys.readouterr().out
    assert "Each demand's design at its peak hour" in printed and "Wall" in printed


def test_a_bad_fleet_file_is_a_command_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.read_text().replace('chip = "h20"', 'chip = "h9000"'))
    with pytest.raises(CommandError, match="unknown catalog chip 'h9000'"):
        call_command("plan_fleet", str(bad))


def test_a_group_is_awaited_even_where_celery_thinks_a_worker_blocks() -> None:
    # The whole suite left Celery's process-wide "a join would block" flag set outside any
    # task; a command's wait on its own group must not trip on it.
    from celery._state import _set_task_join_will_block
    from celery.result import allow_join_result

    with SMALL.open("rb") as fh:
        tables: dict[str, Any] = tomllib.load(fh)
    with allow_join_result():
        _set_task_join_will_block(True)
        assert celery_map(day_task, [(tables, "t2")])[0]["tenant"] == "t2"
