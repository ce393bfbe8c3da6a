"""BCR's one unit and the figures people read: durations, metric values with units, the routing
table's rows and the alert's link to the overview."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from frontend.alert_pages import metric_text
from frontend.plan_pages import routing_rows
from frontend.units import NO_FIGURE, bcr_per_dollar, bcr_text, duration_text


def test_bcr_is_good_requests_per_dollar() -> None:
    # 0.0268 req/s per $/h (the overview figure): 96.5 good requests per $.
    assert bcr_per_dollar(0.0268) == pytest.approx(96.48)
    assert [bcr_text(v) for v in (0.0268, 0.03471, 0.0, None)] == ["96.5", "125", "0", NO_FIGURE]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.85, "850 ms"), (3.21, "3.2 s"), (12.4, "12 s"), (245, "4 min 05 s"), (7800, "2 h 10 min")],
)
def test_durations_read_in_their_own_unit(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_alert_values_carry_their_unit() -> None:
    assert metric_text("ttft_p90", 5.9566) == "6.0 s"
    assert metric_text("tpot_p99", 0.0421) == "42 ms"
    assert metric_text("goodput_rps", 0.8234) == "0.823 req/s"


def test_the_routing_table_reads_as_rules_in_the_tables_own_order() -> None:
    rows = routing_rows({"transfer_budget_s": 0.5, "singular_max_hit": 0.5, "early_rejection": True,
                         "future_knob": 3})  # fmt: skip

    assert [(label, value) for label, value, _ in rows] == [
        ("Singular up to", "50% prefix hit"), ("Transfer budget", "0.5 s"),
        ("Early rejection", "on"), ("future_knob", "3"),
    ]  # fmt: skip


@pytest.mark.django_db
def test_an_alert_links_to_the_overview_at_its_time_range_in_its_scope() -> None:
    from controlplane.telemetry.models import Alert, SlaRule
    from frontend.alert_pages import overview_link

    rule = SlaRule.objects.create(slug="t", name="T", metric="ttft_p90", threshold=1, tenant="acme")
    first, resolved = (
        datetime(2026, 1, 5, 19, 44, tzinfo=UTC),
        datetime(2026, 1, 5, 19, 46, tzinfo=UTC),
    )
    alert = Alert.objects.create(rule=rule, first_seen=first, last_seen=resolved, value=2, worst=3,
                                 threshold=1, state="resolved", resolved_at=resolved)  # fmt: skip

    query = parse_qs(urlsplit(overview_link(alert)).query)

    assert {k: v[0] for k, v in query.items()} == {
        "from": "2026-01-05T19:39:00Z", "to": "2026-01-05T19:51:00Z",
        "mark_from": "2026-01-05T19:44:00Z", "mark_to": "2026-01-05T19:46:00Z",
        "scope": "tenant:acme",
    }  # fmt: skip
