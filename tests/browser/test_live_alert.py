"""The overview's "Open alerts" card follows an alert opened and resolved by the evaluator in
another process (issue #28), in real Chromium over a real daphne.

A module of its own: it ingests records at the current time, which would change the "last
minute" of the other overview tests' showcase (its own here, seeded and removed by ``show``).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.showcase import Showcase, elsewhere, ready, record

pytestmark = pytest.mark.browser


# Transactional: the showcase and the evaluator write from threads of their own (a test's
# transaction would hold SQLite's lock against them); named, it makes pytest-django create the
# test database when this module runs alone.
@pytest.mark.django_db(transaction=True)
def test_an_alert_opens_and_resolves_while_the_overview_stays_open(
    show: Showcase, open_page: Any, django_db_blocker: Any
) -> None:
    """The evaluator runs in this process, not in daphne's: on the embedded defaults its push
    cannot reach the page (an in-memory channel layer per process); the card must follow anyway
    (the socket's state, read from the database)."""
    from django.utils import timezone

    from controlplane.telemetry.alerts import alerts_evaluate
    from controlplane.telemetry.models import SlaRule
    from controlplane.telemetry.rollups import window_start
    from controlplane.telemetry.services import records_ingest

    page = open_page("ops", "/")
    ready(page, "/")
    page.wait_for_selector("#live-status[data-state=live], #live-status[data-state=stale]")
    assert page.inner_text("[data-kpi=alerts]") == "0"

    def only_a_5s_rule() -> tuple[list[int], SlaRule]:
        others = list(SlaRule.objects.filter(enabled=True).values_list("pk", flat=True))
        SlaRule.objects.filter(pk__in=others).update(enabled=False)
        rule = SlaRule.objects.create(slug="live-5s", name="TTFT P90, 5 s windows",
                                      metric="ttft_p90", threshold=5.0, window_s=5)  # fmt: skip
        return others, rule

    others, rule = elsewhere(django_db_blocker, only_a_5s_rule)
    seconds = []
    try:
        for slow, expect in ((True, "1"), (False, "0")):

            def evaluate(slow: bool = slow) -> tuple[Any, Any]:
                now = timezone.now()
                closed = window_start(now, 5) - timedelta(seconds=5)
                batch = [
                    record(closed + timedelta(seconds=1 + i * 0.1), 9000 + i + 100 * slow,
                           prefix=show.api_key_prefix, slow=slow)
                    for i in range(12)
                ]  # fmt: skip
                assert not records_ingest(records=batch).errors
                return now, alerts_evaluate(now=now)

            now, outcome = elsewhere(django_db_blocker, evaluate)
            assert (outcome.opened, outcome.resolved) == ((1, 0) if slow else (0, 1))
            started = time.monotonic()
            page.wait_for_function(
                f"document.querySelector('[data-kpi=alerts]').innerText === '{expect}'",
                timeout=10_000,
            )
            seconds.append(round(time.monotonic() - started, 2))
            if slow:
                assert page.inner_text("[data-kpi=alerts-detail]") == rule.name
                page.screenshot(path=str(ARTIFACTS / "overview-alert-open-1440.png"))
            # The next evaluation must read a later window.
            time.sleep(max(0.0, (window_start(now, 5) + timedelta(seconds=5) - timezone.now())
                           .total_seconds() + 0.2))  # fmt: skip
    finally:

        def restore() -> None:
            rule.delete()
            SlaRule.objects.filter(pk__in=others).update(enabled=True)

        elsewhere(django_db_blocker, restore)
    print("seconds from evaluation to the card (open, resolved):", seconds)
