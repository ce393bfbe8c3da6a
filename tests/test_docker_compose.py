"""docker-compose.yml describes the production stack; every command it runs exists here."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from controlplane.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[1]


def _services() -> dict[str, dict[str, object]]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services: dict[str, dict[str, object]] = doc["services"]
    return services


def test_the_stack_has_its_services_with_health_checks() -> None:
    services = _services()

    assert set(services) == {"postgres", "redis", "web", "worker", "beat"}
    assert all("healthcheck" in s for s in services.values())
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert isinstance(env, dict)
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")


def test_every_app_command_exists() -> None:
    services = _services()
    web = " ".join(services["web"]["command"])  # type: ignore[arg-type]
    worker = services["worker"]["command"]
    beat = services["beat"]["command"]

    assert "daphne" in web and "controlplane.asgi:application" in web
    assert "manage.py migrate" in web
    bin_dir = Path(sys.executable).parent
    for program in ("daphne", "celery"):
        assert (bin_dir / program).exists() or shutil.which(program), program
    assert worker[:4] == ["celery", "-A", "controlplane", "worker"]  # type: ignore[index]
    assert beat[:4] == ["celery", "-A", "controlplane", "beat"]  # type: ignore[index]
    assert celery_app.main == "controlplane"
    from controlplane.asgi import application

    assert callable(application)
