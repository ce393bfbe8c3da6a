"""The simulator's report.html opens in Chromium with no network and draws every chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pdd_core.cli import main
from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser

SMALL = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" / "small.toml"


def test_report_renders_its_charts_offline(tmp_path: Path, page: Any) -> None:
    assert main(["simulate", str(SMALL), "--policy", "pdd", "--out", str(tmp_path)]) == 0
    requested: list[str] = []

    def block_network(route: Any) -> None:
        requested.append(route.request.url)
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", block_network)
    page.goto((tmp_path / "report.html").as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 5")

    charts = page.locator(".js-plotly-plot")
    traces = page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot')).map(e => e.data.length)"
    )
    assert charts.count() >= 5
    assert all(n >= 1 for n in traces)
    assert [u for u in requested if not u.startswith("file://")] == []
    screenshot(page, "sim-report")
