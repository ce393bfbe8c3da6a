"""Browser tests: a real daphne process serving the test database, driven by real Chromium.

Chromium is Debian's (``/usr/bin/chromium``), launched by Playwright with that executable (no
browser download). Screenshots go to ``test-artifacts/screenshots/``. Outside CI the tests skip
when Chromium is missing; in CI they fail, since CI installs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.browser.showcase import USERS, Showcase, elsewhere, showcase_seed
from tests.live_server import ServerProcess, database_url

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("PDD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="session")
def live_server_url(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A daphne subprocess on the test database (same data the test writes and commits)."""
    yield from serve(django_db_blocker, tmp_path_factory)


def serve(
    django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory, **env: str
) -> Iterator[str]:
    """Run a daphne subprocess on the test database (its environment plus ``env``) and yield
    its URL until the caller's fixture ends."""
    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    server = ServerProcess(
        url, tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("daphne") / "daphne.log"
    )
    server.env.update(env)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        if os.environ.get("CI"):
            pytest.fail(f"Chromium not found at {CHROMIUM}; CI installs Debian's chromium")
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; the test's own ORM calls
    # are still plain synchronous code, which Django would otherwise refuse.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


SIZES = {"1440": (1440, 900), "390": (390, 844)}


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Any, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


@pytest.fixture(scope="module")
def show(live_server_url: str, django_db_blocker: Any) -> Iterator[Showcase]:
    """The showcase (``showcase.py``), seeded once per module that asks for it and removed
    after it: a module's tests see no other module's writes."""
    seeded = elsewhere(django_db_blocker, showcase_seed)
    yield seeded
    elsewhere(django_db_blocker, lambda: call_command("flush", "--no-input", verbosity=0))


@pytest.fixture(scope="module")
def sessions(browser: Any, live_server_url: str, show: Showcase) -> dict[str, Any]:
    """A logged-in browser state per user, made once (each test opens fresh contexts)."""
    states = {}
    for name, (username, password) in USERS.items():
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{live_server_url}/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_load_state("load")
        states[name] = context.storage_state()
        context.close()
    return states


@pytest.fixture
def open_page(
    browser: Any, sessions: dict[str, Any], live_server_url: str
) -> Iterator[Callable[..., Any]]:
    """``open_page(user, path, size="1440")``: a fresh page of ``user`` (None: anonymous)."""
    contexts: list[Any] = []

    def make(user: str | None, path: str, size: str = "1440") -> Any:
        width, height = SIZES[size]
        context = browser.new_context(
            viewport={"width": width, "height": height},
            storage_state=sessions[user] if user else None,
        )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: print(f"page error on {path} at {size}: {error}"))
        page.set_default_timeout(20_000)
        page.goto(f"{live_server_url}{path}")
        return page

    yield make
    for context in contexts:
        context.close()
