"""Browser tests: a real daphne process serving the test database, driven by real Chromium.

Chromium is Debian's (``/usr/bin/chromium``), launched by Playwright with that executable (no
browser download). Screenshots go to ``test-artifacts/screenshots/``. Outside CI the tests skip
when Chromium is missing; in CI they fail, since CI installs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
