"""``/metrics``: prometheus_client's exposition behind a token: counters and histograms from the
cumulative rollups, the last closed minute's figures per site, pipeline and model, costs, the
active plan's predictions; and every metric the shipped Grafana dashboard and Prometheus rules
reference is really exported."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from controlplane.planning.models import Plan, PlanStatus
from controlplane.planning.services import plan_activate
from controlplane.telemetry.services import records_ingest
from tests import factories
from tests.controlplane.telemetry.conftest import T0, record_at

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "pdd-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "pdd-rules.yml"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, parsed by prometheus_client's own parser."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


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


def minute_of(when: datetime) -> datetime:
    return datetime.fromtimestamp(int(when.timestamp()) // 60 * 60, tz=UTC)


@pytest.fixture
def fleet(acme: Any) -> None:
    """An active plan (16 P chips in dc-a, 8 MD chips in dc-b, at $2/h each) and, in the last closed
    minute: three dc-a P-MD requests (two within the SLA, one rejected) and one dc-b P-RLD-MD
    request that missed it. The same records also finish now, so that a scrape one minute
    later still finds them in its last closed minute. And one record of an unknown model,
    refused: a dead letter of the gateway ``gateway``."""
    factories.chip(slug="h800", price_per_hour="2.0000")
    predicted = {"hit_token_weighted": 0.9, "hit_request_weighted": 0.85, "goodput_rps": 3.0,
                 "bcr": 0.0625}  # fmt: skip
    pools = [{"site": "dc-a", "chip": "h800", "role": "P", "instances": 2, "tp": 8},
             {"site": "dc-b", "chip": "h800", "role": "MD", "instances": 1, "tp": 8}]  # fmt: skip
    plan = Plan.objects.create(
        scenario="small.toml", inputs={}, status=PlanStatus.DONE,
        result={"feasible": True, "model": "model-x", "pools": pools, "predicted": predicted},
    )  # fmt: skip
    plan_activate(plan=plan)
    now = timezone.now()
    for n, when in enumerate((minute_of(now) - timedelta(seconds=30), now)):
        records_ingest(records=[
            record_at(when, request_id=f"a{n}", pipeline="P-MD", handoff_mode=""),
            record_at(when, request_id=f"b{n}", pipeline="P-MD", handoff_mode="", hit_tokens=500,
                      miss_tokens=500),
            record_at(when, request_id=f"c{n}", pipeline="P-MD", handoff_mode="", rejected=True),
            record_at(when, request_id=f"d{n}", site="dc-b", sla_met=False),
        ])  # fmt: skip
    records_ingest(records=[record_at(now, request_id="ghost", model="ghost")])


def scrape(client: Any, **headers: str) -> tuple[Any, Samples]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200
    return response, parse(response.content.decode())


def test_the_last_minute_per_site_pipeline_and_model(viewer: Any, fleet: None) -> None:
    _, m = scrape(viewer)

    site_a, site_b = frozenset({("site", "dc-a")}), frozenset({("site", "dc-b")})
    pipe, model = frozenset({("pipeline", "P-MD")}), frozenset({("model", "model-x")})
    assert m[("pdd_site_goodput_requests_per_second", site_a)] == pytest.approx(2 / 60)
    assert m[("pdd_site_goodput_requests_per_second", site_b)] == 0
    assert m[("pdd_site_sla_attainment_ratio", site_a)] == pytest.approx(2 / 3)
    assert m[("pdd_site_sla_attainment_ratio", site_b)] == 0
    assert m[("pdd_site_bcr", site_a)] == pytest.approx(2 / 60 / 32)
    assert m[("pdd_pipeline_goodput_requests_per_second", pipe)] == pytest.approx(2 / 60)
    assert m[("pdd_pipeline_bcr", pipe)] == pytest.approx(2 / 60 / 48)
    assert m[("pdd_model_sla_attainment_ratio", model)] == pytest.approx(2 / 4)
    assert m[("pdd_model_bcr", model)] == pytest.approx(2 / 60 / 48)
    assert m[("pdd_goodput_requests_per_second", frozenset())] == pytest.approx(2 / 60)
    assert m[("pdd_sla_attainment_ratio", frozenset())] == pytest.approx(2 / 4)
    token = frozenset({("weighting", "token")})
    request = frozenset({("weighting", "request")})
    assert m[("pdd_site_observed_hit_ratio", site_a | token)] == pytest.approx(1400 / 2000)
    assert m[("pdd_site_observed_hit_ratio", site_a | request)] == pytest.approx((0.9 + 0.5) / 2)
    assert m[("pdd_model_observed_hit_ratio", model | token)] == pytest.approx(2300 / 3000)


def test_costs_objectives_and_the_plans_predictions(viewer: Any, fleet: None) -> None:
    _, m = scrape(viewer)

    assert m[("pdd_cost_per_hour_dollars", frozenset())] == 48
    assert m[("pdd_site_cost_per_hour_dollars", frozenset({("site", "dc-a")}))] == 32
    assert m[("pdd_site_cost_per_hour_dollars", frozenset({("site", "dc-b")}))] == 16
    assert m[("pdd_pipeline_cost_per_hour_dollars", frozenset({("pipeline", "P-RLD")}))] == 32
    assert m[("pdd_pipeline_cost_per_hour_dollars", frozenset({("pipeline", "P-MD")}))] == 48
    model = frozenset({("model", "model-x")})
    assert m[("pdd_model_predicted_hit_ratio", model | {("weighting", "token")})] == 0.9
    assert m[("pdd_model_predicted_hit_ratio", model | {("weighting", "request")})] == 0.85
    assert m[("pdd_model_predicted_goodput_requests_per_second", model)] == 3.0
    assert m[("pdd_model_predicted_bcr", model)] == 0.0625
    assert m[("pdd_active_plan_version", frozenset())] == 1
    assert m[("pdd_sla_objective_seconds", frozenset({("objective", "ttft_p99")}))] == 5.0
    assert (
        m[("pdd_md_tokens_total", frozenset({("site", "dc-b"), ("pipeline", "P-RLD-MD")}))] == 376
    )


def test_a_scrape_costs_the_same_queries_whatever_the_number_of_sites(
    viewer: Any, fleet: None
) -> None:
    scrape(viewer)  # once-per-token work (last use) out of the way
    with CaptureQueriesContext(connection) as few:
        scrape(viewer)
    now = timezone.now()
    records_ingest(records=[record_at(now, request_id=f"more-{n}", site=f"dc-{n}")
                            for n in range(10)])  # fmt: skip
    with CaptureQueriesContext(connection) as many:
        _, m = scrape(viewer)

    assert len({site for (_, labels) in m for key, site in labels if key == "site"}) == 12
    assert len(many.captured_queries) == len(few.captured_queries)


def test_openmetrics_when_the_scraper_asks_for_it(viewer: Any, fleet: None) -> None:
    response, m = scrape(viewer, HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")

    assert response["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert response.content.decode().endswith("# EOF\n")
    assert m[("pdd_requests_total", frozenset({("site", "dc-a"), ("pipeline", "P-MD")}))] == 6


STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def referenced(expr: str) -> set[str]:
    """The pdd metric names (``pdd_...``) and recorded series (``level:pdd_...:op``) in PromQL."""
    names = set(NAME.findall(STRING.sub('""', expr)))
    return {n for n in names if n.startswith("pdd_") or ":pdd_" in n}


def dashboard_exprs() -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(DASHBOARD.read_text()))
    return found


def test_the_dashboard_panels_query_the_prometheus_data_source_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    queried = [p for p in panels if p["type"] != "row"]

    assert len({p["id"] for p in panels}) == len(panels)
    assert {p["datasource"]["uid"] for p in queried} == {"${datasource}"}
    assert all(p["targets"] for p in queried)
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource", "site"]


def test_every_metric_the_dashboard_and_the_rules_use_is_exported(viewer: Any, fleet: None) -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    used = set().union(*(referenced(e) for e in dashboard_exprs()))
    used |= set().union(*(referenced(r["expr"]) for r in rules))
    _, m = scrape(viewer)
    exported = {name for name, _ in m}

    assert {r["alert"] for r in rules if "alert" in r} >= {"PddSlaAttainmentBelowTarget",
                                                         "PddTtftP99AboveObjective"}  # fmt: skip
    assert len(used) > 20
    assert sorted(n for n in used if ":" in n and n not in recorded) == []
    assert sorted(n for n in used if ":" not in n and n not in exported) == []


def test_the_alert_rules_fire_as_their_unit_tests_say(db: None) -> None:
    if shutil.which("promtool") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install promtool (Debian package prometheus)")
        pytest.skip("promtool (Debian package prometheus) is not installed")

    result = subprocess.run(
        ["promtool", "test", "rules", "pdd-rules.test.yml"],
        cwd=RULES.parent, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr


def test_dead_letters_per_agent(viewer: Any, fleet: None) -> None:
    from controlplane.agents.models import Agent
    from controlplane.inventory.models import Site

    site = Site.objects.get_or_create(slug="dc-a", defaults={"name": "A"})[0]
    Agent.objects.create(name="gateway", site=site, role="gateway",
                         stats={"records_rejected": 7})  # fmt: skip

    _, m = scrape(viewer)

    labels = frozenset({("site", "dc-a"), ("agent", "gateway")})
    assert m[("pdd_dead_letters_pending", labels)] == 1
    assert m[("pdd_dead_letters", labels)] == 1
    assert m[("pdd_agent_records_rejected_total", labels)] == 7
