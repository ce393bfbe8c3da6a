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

    assert set(services) == {"postgres", "redis", "migrate", "web", "worker", "beat"}
    assert all("healthcheck" in s for s in services.values())
    for name in ("migrate", "web", "worker", "beat"):
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
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    bin_dir = Path(sys.executable).parent
    for program in ("daphne", "celery"):
        assert (bin_dir / program).exists() or shutil.which(program), program
    assert worker[:4] == ["celery", "-A", "controlplane", "worker"]  # type: ignore[index]
    assert beat[:4] == ["celery", "-A", "controlplane", "beat"]  # type: ignore[index]
    assert celery_app.main == "controlplane"
    from controlplane.asgi import application

    assert callable(application)


def test_processes_that_use_the_database_wait_for_the_migrations() -> None:
    services = _services()

    for name in ("web", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert isinstance(depends, dict)
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["postgres"] == {"condition": "service_healthy"}
    assert services["migrate"]["restart"] == "no"


def test_the_secret_key_must_be_set_rather_than_defaulted() -> None:
    for name in ("migrate", "web", "worker", "beat"):
        env = _services()[name]["environment"]
        assert isinstance(env, dict)
        assert env["PDD_SECRET_KEY"] == "${PDD_SECRET_KEY:?set PDD_SECRET_KEY}"


def test_the_image_installs_the_hashed_lock_and_runs_as_a_user() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]

    assert "RUN pip install --require-hashes -r requirements/runtime.txt" in lines
    assert "RUN pip install --no-deps . \\" in lines
    assert "USER 10001:10001" in lines
    assert lines.index("USER 10001:10001") > lines.index("RUN pip install --no-deps . \\")


def test_the_build_context_leaves_out_environments_state_and_history() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())

    assert {".git", ".venv", ".venv-*", "var", "test-artifacts", ".env"} <= ignored
    for copied in ("pdd_core", "controlplane", "frontend", "fixtures", "requirements"):
        assert copied not in ignored


def _dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def _ignored(path: str, patterns: set[str]) -> bool:
    import fnmatch

    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(p, pat) for p in prefixes for pat in patterns)


def test_everything_the_image_copies_exists_and_is_in_the_build_context() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split()) - {"#"}
    copies = [line.split()[1:-1] for line in _dockerfile() if line.startswith("COPY ")]
    sources = [source for sources in copies for source in sources]

    assert {"requirements/runtime.txt", "pyproject.toml", "README.md", "pdd_core"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _ignored(source, ignored), f"{source} is left out by .dockerignore"


def test_the_image_creates_the_user_it_runs_as_and_a_supported_python() -> None:
    import re
    import tomllib

    lines = _dockerfile()
    run = next(line for line in lines if "useradd" in line)
    base = next(line for line in lines if line.startswith("FROM "))

    assert "groupadd --system --gid 10001 pdd" in run
    assert "useradd --system --uid 10001 --gid pdd" in run
    assert "chown pdd:pdd /var/lib/pdd" in run
    assert [line for line in lines if line.startswith("USER ")] == ["USER 10001:10001"]
    found = re.fullmatch(r"FROM python:3\.(\d+)-slim", base)
    assert found is not None, base
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11,<3.14" and 11 <= int(found[1]) <= 13


def test_the_readme_says_the_secret_key_must_be_set_and_how() -> None:
    readme = (ROOT / "README.md").read_text()
    deploy = readme.split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]

    assert "**`PDD_SECRET_KEY` must be\nset**" in deploy
    assert (
        "echo \"PDD_SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')\" "
        ">> .env\ndocker compose up -d --build"
    ) in deploy
