"""Settings from the environment: defaults, switches, and loud failures naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane import env

ROOT = Path(__file__).resolve().parents[3]


def test_database_defaults_to_sqlite(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("X_DB", raising=False)

    db = env.database_from_url("X_DB", tmp_path / "a.sqlite3")

    assert db == {"ENGINE": "controlplane.core.sqlite3", "NAME": str(tmp_path / "a.sqlite3")}


def test_postgres_url_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_DB", "postgres://u:p%40ss@db.local:6543/pdd?sslmode=require")

    db = env.database_from_url("X_DB", Path("unused"))

    assert (db["ENGINE"], db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "django.db.backends.postgresql", "pdd", "u", "p@ss", "db.local", "6543"
    )  # fmt: skip
    assert db["OPTIONS"] == {
        "sslmode": "require",
        "pool": {"min_size": 1, "max_size": 10, "timeout": 30, "max_idle": 60},
    }
    assert db["CONN_MAX_AGE"] == 0


def test_pool_size_comes_from_settings_and_zero_turns_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("X_DB", "postgres://db.local/pdd")
    monkeypatch.setenv("PDD_DB_POOL_MIN_SIZE", "4")
    monkeypatch.setenv("PDD_DB_POOL_MAX_SIZE", "40")
    sized = env.database_from_url("X_DB", Path("unused"))
    monkeypatch.setenv("PDD_DB_POOL_MIN_SIZE", "0")
    monkeypatch.setenv("PDD_DB_POOL_MAX_SIZE", "0")
    off = env.database_from_url("X_DB", Path("unused"))

    assert (sized["OPTIONS"]["pool"]["min_size"], sized["OPTIONS"]["pool"]["max_size"]) == (4, 40)
    assert (off["OPTIONS"], off["CONN_MAX_AGE"]) == ({}, 0)


def test_pool_minimum_above_maximum_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_DB", "postgres://db.local/pdd")
    monkeypatch.setenv("PDD_DB_POOL_MIN_SIZE", "5")
    monkeypatch.setenv("PDD_DB_POOL_MAX_SIZE", "2")

    with pytest.raises(ImproperlyConfigured, match="PDD_DB_POOL_MIN_SIZE"):
        env.database_from_url("X_DB", Path("unused"))


@pytest.mark.parametrize(
    ("reader", "value"),
    [
        (lambda: env.database_from_url("X_VAR", Path("x")), "mysql://a/b"),
        (lambda: env.database_from_url("X_VAR", Path("x")), "postgres://host:notaport/db"),
        (lambda: env.database_from_url("X_VAR", Path("x")), "postgres://host/"),
        (lambda: env.redis_from_url("X_VAR"), "http://localhost:6379"),
        (lambda: env.redis_from_url("X_VAR"), "redis://localhost:6379/abc"),
        (lambda: env.env_bool("X_VAR", False), "maybe"),
        (lambda: env.env_int("X_VAR", 1, minimum=1), "0"),
        (lambda: env.env_int("X_VAR", 1), "ten"),
        (lambda: env.env_list("X_VAR", []), "a,,b"),
    ],
)
def test_malformed_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, reader: object, value: str
) -> None:
    monkeypatch.setenv("X_VAR", value)

    with pytest.raises(ImproperlyConfigured, match="X_VAR"):
        reader()  # type: ignore[operator]


def test_startup_stops_on_a_malformed_database_url() -> None:
    environ = {**os.environ, "DATABASE_URL": "mysql://nope/x"}

    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=environ,
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode != 0
    assert "DATABASE_URL: unsupported scheme 'mysql'" in result.stderr


def test_env_example_lists_every_variable_read() -> None:
    import re

    source = (ROOT / "controlplane" / "settings.py").read_text()
    read = set(re.findall(r'env\.\w+\(\s*"([A-Z_]+)"', source))
    listed = set(re.findall(r"^#?\s*([A-Z_]+)=", (ROOT / ".env.example").read_text(), re.M))

    assert read
    assert read <= listed, read - listed
