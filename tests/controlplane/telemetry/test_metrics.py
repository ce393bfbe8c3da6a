"""``/metrics``: Prometheus text exposition, behind a token, counters from the rollups."""

from __future__ import annotations

import re
from typing import Any

import pytest

from controlplane.telemetry.services import records_ingest
from tests.controlplane.telemetry.conftest import T0, record_at

pytestmark = pytest.mark.django_db
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$")


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A strict little parser of the text format: every line is a comment or a sample."""
    samples = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        found = SAMPLE.match(line)
        assert found, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', found.group(3) or ""))
        samples[(found.group(1), labels)] = float(found.group(4))
    return samples


def test_counters_and_histograms(viewer: Any, acme: Any) -> None:
    records_ingest(records=[
        record_at(T0, request_id="a", ttft_s=0.3, pipeline="P-MD", handoff_mode=""),
        record_at(T0, request_id="b", ttft_s=0.3, pipeline="P-MD", handoff_mode=""),
        record_at(T0, request_id="c", pipeline="P-MD", handoff_mode="", rejected=True),
        record_at(T0, request_id="d", site="dc-b", ttft_s=2.0),
    ])  # fmt: skip

    response = viewer.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    m = parse(response.content.decode())
    a_md = frozenset({("site", "dc-a"), ("pipeline", "P-MD")})
    assert m[("pdd_requests_total", a_md)] == 3
    assert m[("pdd_rejected_requests_total", a_md)] == 1
    assert m[("pdd_input_tokens_total", a_md)] == 2000
    assert m[("pdd_hit_tokens_total", a_md)] == 1800
    assert m[("pdd_wan_bytes_total", a_md)] == 10_000_000
    assert m[("pdd_ttft_seconds_count", a_md)] == 2
    assert m[("pdd_ttft_seconds_sum", a_md)] == pytest.approx(0.6)
    assert m[("pdd_ttft_seconds_bucket", a_md | {("le", "0.1")})] == 0
    assert m[("pdd_ttft_seconds_bucket", a_md | {("le", "0.316228")})] == 2
    assert m[("pdd_ttft_seconds_bucket", a_md | {("le", "+Inf")})] == 2
    b = frozenset({("site", "dc-b"), ("pipeline", "P-RLD-MD")})
    assert m[("pdd_rld_tokens_total", b)] == 12
    assert m[("pdd_active_plan_version", frozenset())] == 0
    assert ("pdd_agents_up", frozenset()) in m


def test_dedicated_metrics_token(client: Any, settings: Any) -> None:
    settings.TELEMETRY_METRICS_TOKEN = "scrape-me-please"

    ok = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-please",
                    HTTP_ACCEPT="application/openmetrics-text;q=0.9")  # fmt: skip
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me-not")

    assert ok.status_code == 200
    assert wrong.status_code == 401


@pytest.mark.parametrize("persona,status", [("anonymous", 401), ("outsider", 401),
    ("billing_client", 403), ("agent", 403), ("operator", 200)])  # fmt: skip
def test_refused_without_a_reading_token(request: Any, persona: str, status: int) -> None:
    assert request.getfixturevalue(persona).get("/metrics").status_code == status
