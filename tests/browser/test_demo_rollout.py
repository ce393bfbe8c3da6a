"""``make demo`` as an operator drives it (issue #26): plan from the UI, activate, and watch the
running data plane follow, in real Chromium against a real ``manage.py run_demo`` (control plane
on the embedded defaults, ``pdd up`` of the timed plane joined to it, replayed load).

The plan is the small scenario's (the demo's sites and chips), recommended among the families the
plane's agents run (its cheapest design is aggregated, which they do not: the plan page says so).
After activation, Topology shows desired = running for every pool of the plan, the overview marks
the live workload on the plan's bathtub, and the month's draft invoice bills the requests before
the activation and after it under their config versions. No log holds a traceback. Screenshots
(``demo-rollout-*``, 1440 and 390 px) go to ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import SIZES, log_in, screenshot
from tests.demo_process import running_demo

pytestmark = [pytest.mark.browser, pytest.mark.system]

OPERATOR = ("admin", "pdd-demo-admin")  # run_demo's defaults, as the README prints them
PLAN_S = 900.0  # the planner on a 2-core box beside the demo's plane and load
ROLLOUT_S = 240.0


def _until(page: Any, path: str, check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Reload ``path`` every few seconds until ``check()`` is truthy; its value."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            screenshot(page, "demo-rollout-timeout")
            pytest.fail(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(4.0)
        page.goto(path)


def _pools(page: Any) -> list[tuple[str, str, str]]:
    """(key, desired, running) of every pool row on Topology."""
    rows = page.locator(".topo-pool").all()
    return [(r.get_attribute("data-key") or "", r.get_attribute("data-desired") or "",
             r.get_attribute("data-running") or "") for r in rows]  # fmt: skip


@pytest.mark.timeout(2400)
def test_an_activated_plan_reshapes_the_demo_plane_and_bills_both_versions(
    tmp_path: Path, browser: Any
) -> None:
    with running_demo(tmp_path / "var") as demo:
        demo.start()
        url = f"http://127.0.0.1:{demo.port}"
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(30_000)
        log_in(page, url, *OPERATOR)

        page.goto(f"{url}/plans/")
        page.select_option("#id_scenario", "small.toml")
        page.click("#plan-create button[type=submit]")
        page.wait_for_url(re.compile(r".*/plans/\d+/$"))
        plan_url = page.url
        _until(page, plan_url, lambda: page.locator("#plan-status[data-status=done]").count(),
               PLAN_S, "the plan done")  # fmt: skip
        recommended = page.inner_text("#plan-recommended")
        assert recommended.startswith("Recommended among the families this deployment runs")
        # A design the plane enacts: disaggregated, so it has a decode pool (an aggregated plan's
        # one pool is a P row that decodes too; the pools' role column said nothing of that).
        roles = {r.split("\t")[0] for r in page.locator("#plan-pools tbody tr").all_inner_texts()}
        assert "MD" in roles
        screenshot(page, "demo-rollout-plan-1440")

        page.click("#activate")
        page.click("#activate-confirm")
        badge = page.locator("h1 [data-state=live]")
        badge.wait_for()
        version = int(re.findall(r"version (\d+)", badge.inner_text())[0])
        activated = time.monotonic()

        def converged() -> bool:
            page.wait_for_selector("#agents tbody tr[data-agent]")
            pools = [p for p in _pools(page) if p[1] not in ("", "0")]
            stale = [p for p in _pools(page) if p[1] == "0" and p[2] != "0"]
            busy = page.locator(".topo-pool .state-starting, .topo-pool .state-draining").count()
            return bool(pools) and all(d == r for _, d, r in pools) and not stale and not busy

        page.goto(f"{url}/topology/")
        _until(page, f"{url}/topology/", converged, ROLLOUT_S,
               "Topology at desired = running, none starting or draining")  # fmt: skip
        rollout_s, reached = time.monotonic() - activated, _pools(page)
        assert page.locator("#not-enacted").count() == 0
        # An agent the rollout stopped reads "stopped", not "healthy", though it still reports.
        rows = page.locator("#agents tbody tr[data-agent]").all()
        stopped = [r for r in rows if "stopped" in r.locator("td").nth(5).inner_text()]
        assert all(r.locator("td").nth(1).inner_text() == "stopped" for r in stopped)
        # what a pool's shape means on this one-machine plane, said on the page
        assert "an instance of any shape runs as one agent of its role" in page.inner_text(
            "#desired-from"
        )
        for size in SIZES:
            page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
            page.goto(f"{url}/topology/")
            page.wait_for_selector("#agents tbody tr[data-agent]")
            screenshot(page, f"demo-rollout-topology-{size}")
        page.set_viewport_size({"width": 1440, "height": 900})

        page.goto(f"{url}/")
        page.wait_for_selector("#bathtub-chart.js-plotly-plot")
        _until(page, f"{url}/", lambda: "live now (hit" in page.inner_text("#bathtub-chart"),
               120, "the live workload on the overview's bathtub")  # fmt: skip
        screenshot(page, "demo-rollout-overview-1440")

        month = time.strftime("%Y-%m", time.gmtime())
        invoice = f"{url}/billing/invoices/demo/{month}/"

        def both_versions() -> bool:
            lines = " ".join(page.locator("#invoice-lines tbody tr").all_inner_texts())
            return "before any plan" in lines and f"config v{version}" in lines

        page.goto(invoice)
        _until(page, invoice, both_versions, 180, "the invoice's lines before and after")
        screenshot(page, "demo-rollout-invoice-1440")
        context.close()
        print(f"\ndemo rollout: {plan_url} as version {version}; Topology at desired "
              f"{rollout_s:.0f} s after activation: {reached}")  # fmt: skip
        assert demo.tracebacks() == []
