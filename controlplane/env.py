"""Settings read from the environment, in one small module.

Each reader returns a typed value or raises ``ImproperlyConfigured`` naming the variable, so a
malformed value stops start-up with a message an operator can act on. Every variable read here
is listed, with its default, in ``.env.example``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str) -> str:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (1/0, true/false), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None or value == "":
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name}: empty item in comma-separated list {value!r}")
    return items


def database_from_url(name: str, default_sqlite: Path) -> dict[str, Any]:
    """Django DATABASES['default'] from ``DATABASE_URL`` (postgres:// or sqlite:///path)."""
    value = _raw(name)
    if value is None or value == "":
        return {"ENGINE": "controlplane.core.sqlite3", "NAME": str(default_sqlite)}
    parts = urlsplit(value)
    if parts.scheme == "sqlite":
        path = unquote(parts.path)
        if path.startswith("/") and parts.netloc == "":
            path = path[1:] if path.startswith("//") else path
        if not path or path == "/":
            raise ImproperlyConfigured(f"{name}: sqlite URL needs a path, got {value!r}")
        return {"ENGINE": "controlplane.core.sqlite3", "NAME": path}
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        db_name = unquote(parts.path.lstrip("/"))
        if not db_name:
            raise ImproperlyConfigured(f"{name}: PostgreSQL URL needs a database name: {value!r}")
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"{name}: malformed port in {value!r}") from None
        options: dict[str, Any] = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        pool = postgres_pool()
        if pool is not None:
            options["pool"] = pool
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": db_name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(port or ""),
            "OPTIONS": options,
            # No connection kept per thread: under ASGI every sync view and consumer call may
            # run on its own thread, and persistent per-thread connections exhaust the server.
            "CONN_MAX_AGE": 0,
        }
    raise ImproperlyConfigured(
        f"{name}: unsupported scheme {parts.scheme!r}; use postgres://... or sqlite:///path"
    )


def postgres_pool() -> dict[str, Any] | None:
    """psycopg 3's connection pool as Django 5.2 takes it (``OPTIONS["pool"]``), sized by
    ``PDD_DB_POOL_MIN_SIZE``/``PDD_DB_POOL_MAX_SIZE``; ``PDD_DB_POOL_MAX_SIZE=0`` turns the
    pool off (one connection per request, closed after it). A request waits at most
    ``PDD_DB_POOL_TIMEOUT_S`` for a connection; connections above the minimum idle for
    ``PDD_DB_POOL_MAX_IDLE_S`` are closed, so the server returns to its baseline after a burst.
    """
    max_size = env_int("PDD_DB_POOL_MAX_SIZE", 10, minimum=0)
    if max_size == 0:
        return None
    min_size = env_int("PDD_DB_POOL_MIN_SIZE", 1, minimum=0)
    if min_size > max_size:
        raise ImproperlyConfigured(
            f"PDD_DB_POOL_MIN_SIZE ({min_size}) exceeds PDD_DB_POOL_MAX_SIZE ({max_size})"
        )
    return {
        "min_size": min_size,
        "max_size": max_size,
        "timeout": env_int("PDD_DB_POOL_TIMEOUT_S", 30, minimum=1),
        "max_idle": env_int("PDD_DB_POOL_MAX_IDLE_S", 60, minimum=1),
    }


@dataclass(frozen=True)
class RedisUrl:
    url: str


def redis_from_url(name: str) -> RedisUrl | None:
    """``REDIS_URL`` (redis:// or rediss://, optional /db), or None for the embedded defaults."""
    value = _raw(name)
    if value is None or value == "":
        return None
    parts = urlsplit(value)
    if parts.scheme not in {"redis", "rediss"} or not parts.hostname:
        raise ImproperlyConfigured(f"{name}: expected redis://host:port/db, got {value!r}")
    try:
        _ = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name}: malformed port in {value!r}") from None
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ImproperlyConfigured(f"{name}: database must be a number, got {db!r}")
    return RedisUrl(value)


def secret_key_file(path: Path) -> str:
    """A random secret key kept in ``path`` (created on first use), for the embedded defaults."""
    import secrets

    try:
        existing = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key, encoding="utf-8")
    path.chmod(0o600)
    return key
