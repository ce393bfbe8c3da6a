"""A rollout in Chromium (issue #26 item 4): Topology shows each desired pool's running against
desired instances and its agents by state, computed again by the page's script from the live
state; the overview marks the live workload on the active plan's bathtub with the drift card.
Screenshots at 1440 and 390 px in test-artifacts/screenshots/ (rollout-*)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests import factories
from tests.browser.conftest import SIZES, log_in, screenshot
from tests.browser.showcase import elsewhere
from tests.controlplane.telemetry.conftest import record_at
from tests.frontend.test_plan_pages import DONE_RESULT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_P = "prefill/h800/tp4xpp2"
BATHTUB = {**DONE_RESULT["bathtub"], "points": [
    {"hit_rate": round(0.098 * i, 4), "goodput_rps": 0.5 + 0.2 * i,
     "revenue_per_cost": 1.0 + 0.3 * i - 0.02 * i * i, "bcr": 0.01} for i in range(11)
]}  # fmt: skip


def _world() -> None:
    from controlplane.telemetry.services import records_ingest

    User.objects.create_superuser("ops", "ops@example.com", "ops-pass-123")
    workload = {"requests": 500, "rate_rps": 2.0, "mean_hit": 0.9, "mean_input_tokens": 1000.0,
                "mean_output_tokens": 200.0}  # fmt: skip
    factories.rollout_world(
        {**DONE_RESULT, "bathtub": BATHTUB, "search": {"workload": workload}, "pools": [
            {"site": "dc-a", "chip": "h800", "role": "P", "instances": 3, "tp": 4, "pp": 2,
             "chips": 24, "cost_per_hour": 48.0},
            {"site": "dc-b", "chip": "h800", "role": "MD", "instances": 1, "tp": 8, "chips": 8,
             "cost_per_hour": 16.0},
        ]},
        [("p-0", "dc-a", "prefill", "serving", NEW_P),
         ("p-1", "dc-a", "prefill", "serving", NEW_P),
         ("p-2", "dc-a", "prefill", "starting", NEW_P),
         ("p-old", "dc-a", "prefill", "draining", "prefill/h800/tp8"),
         ("md-0", "dc-b", "main", "serving", "main/h800/tp8")],
    )  # fmt: skip
    factories.record_world("acme")
    now = timezone.now()
    records_ingest(records=[record_at(now - timedelta(seconds=5 * i + 2)) for i in range(20)])


def _beat() -> None:
    from controlplane.agents.models import Agent

    Agent.objects.update(last_heartbeat_at=timezone.now())


def test_topology_and_overview_show_the_rollout_at_1440_and_390(
    live_server_url: str, browser: Any, django_db_blocker: Any
) -> None:
    elsewhere(django_db_blocker, _world)
    for size, (width, height) in SIZES.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            elsewhere(django_db_blocker, _beat)  # every agent healthy, just heard from
            log_in(page, live_server_url, "ops", "ops-pass-123")
            page.goto(f"{live_server_url}/topology/")
            new = page.locator(f'.topo-pool[data-key="{NEW_P}"]')
            new.wait_for()
            # the script counted again from the agents it was given: 2 serving of 3 desired
            assert new.get_attribute("data-running") == "2"
            assert new.locator(".js-running").inner_text() == "2"
            assert "short" in (new.get_attribute("class") or "")
            assert new.locator(".state-starting").inner_text() == "1 starting"
            old = page.locator('.topo-pool[data-key="prefill/h800/tp8"]')
            assert old.locator(".state-draining").inner_text() == "1 draining"
            assert page.locator('#agents tr[data-agent="p-old"] td').nth(5).inner_text() == (
                "draining · prefill/h800/tp8"
            )
            screenshot(page, f"rollout-topology-{size}")

            page.goto(f"{live_server_url}/")
            card = page.locator("#plan-drift")
            card.wait_for()
            page.wait_for_selector("#bathtub-chart.js-plotly-plot")
            assert page.locator("#drift-alert").count() == 1  # planned 2 req/s, live far less
            assert "arrival rate" in page.locator("#drift-alert").inner_text()
            assert "live now (hit 90%" in page.locator("#bathtub-chart").inner_text()
            box = card.bounding_box()
            assert box is not None and box["x"] + box["width"] <= width
            assert page.locator("#plan-from-live button").is_visible()
            screenshot(page, f"rollout-overview-{size}")
        finally:
            context.close()
