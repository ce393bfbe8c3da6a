"""SLA rules: alerts open, stay open and resolve with first/last seen and value; the webhook
is signed and a real loopback HTTP server receives and verifies it; rules are operator-only."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from controlplane.telemetry.alerts import alerts_evaluate
from controlplane.telemetry.models import Alert, SlaRule
from controlplane.telemetry.services import records_ingest
from tests.controlplane.telemetry.conftest import T0, record_at

pytestmark = pytest.mark.django_db(transaction=True)


def _minute(offset: int, ttft: float, n: int = 3) -> None:
    start = T0 + timedelta(minutes=offset)
    records_ingest(records=[record_at(start + timedelta(seconds=i), ttft_s=ttft,
                                      request_id=f"m{offset}-{i}") for i in range(n)])  # fmt: skip


def _rule(**kw: Any) -> SlaRule:
    data = {"slug": "ttft", "name": "TTFT P90", "metric": "ttft_p90", "threshold": 1.0,
            "window_s": 60}  # fmt: skip
    return SlaRule.objects.create(**{**data, **kw})


def test_alert_opens_stays_and_resolves(acme: Any) -> None:
    _rule()
    _minute(0, ttft=2.0)
    _minute(1, ttft=3.0)
    _minute(2, ttft=0.2)

    opened = alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))
    kept = alerts_evaluate(now=T0 + timedelta(minutes=2, seconds=2))
    alert = Alert.objects.get()
    assert (opened.opened, kept.updated, alert.state) == (1, 1, "open")
    assert alert.first_seen == T0 + timedelta(minutes=1)
    assert alert.last_seen == T0 + timedelta(minutes=2)
    assert alert.worst == pytest.approx(3.0, rel=0.06)

    resolved = alerts_evaluate(now=T0 + timedelta(minutes=3, seconds=2))

    alert.refresh_from_db()
    assert (resolved.resolved, alert.state) == (1, "resolved")
    assert alert.resolved_at == T0 + timedelta(minutes=3)
    assert alert.value == pytest.approx(0.2, rel=0.06)
    assert alert.threshold == 1.0


def test_tenant_rule_reads_its_tenant_and_idle_windows_are_not_breaches(acme: Any) -> None:
    from tests import factories

    factories.tenant(slug="globex", name="Globex")
    _rule(tenant="globex")
    _minute(0, ttft=9.0)  # acme's traffic: not this rule's

    result = alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))

    assert (result.opened, Alert.objects.count()) == (0, 0)


def test_goodput_floor_breaches_below(acme: Any) -> None:
    _rule(slug="floor", metric="goodput_rps", threshold=1.0)
    _minute(0, ttft=0.1, n=6)  # 6 good requests in 60 s: 0.1 req/s

    alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))

    assert Alert.objects.get().value == pytest.approx(0.1)


class _Receiver(BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    _Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()
    server.server_close()


@pytest.fixture
def eager_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the delivery task in-process also when REDIS_URL points Celery at a broker."""
    from controlplane.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def test_webhook_is_signed_and_verified_by_a_real_server(
    acme: Any, receiver: str, settings: Any, eager_celery: None
) -> None:
    settings.TELEMETRY_WEBHOOK_SECRET = "s3cret"
    _rule(webhook_url=receiver)
    _minute(0, ttft=2.0)

    alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))

    assert len(_Receiver.received) == 1
    headers, body = _Receiver.received[0]
    timestamp = headers["x-pdd-timestamp"]
    expected = hmac.new(b"s3cret", timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["x-pdd-signature"], f"sha256={expected}")
    payload = json.loads(body)
    assert (payload["event"], payload["rule"], payload["state"]) == ("opened", "ttft", "open")
    assert payload["first_seen"] == "2026-01-05T10:01:00Z"


def test_unreachable_webhook_does_not_fail_evaluation(acme: Any, eager_celery: None) -> None:
    _rule(webhook_url="http://127.0.0.1:9/nothing-listens")
    _minute(0, ttft=2.0)

    result = alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))

    assert result.opened == 1


def test_rules_crud_operator_writes_viewer_reads(operator: Any, viewer: Any) -> None:
    body = {"slug": "r1", "name": "R1", "metric": "tpot_p99", "threshold": 0.1, "window_s": 5}

    refused = viewer.post("/api/v1/telemetry/sla-rules/", body, format="json")
    created = operator.post("/api/v1/telemetry/sla-rules/", body, format="json")
    listed = viewer.get("/api/v1/telemetry/sla-rules/")
    bad = operator.post("/api/v1/telemetry/sla-rules/", {**body, "slug": "r2", "window_s": 7},
                        format="json")  # fmt: skip

    assert refused.status_code == 403
    assert created.status_code == 201, created.json()
    assert [r["slug"] for r in listed.json()["results"]] == ["r1"]
    assert bad.status_code == 400
    assert SlaRule.objects.count() == 1


def test_alerts_api_lists_open_alerts(acme: Any, viewer: Any, operator: Any) -> None:
    _rule()
    _minute(0, ttft=2.0)
    alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))

    body = viewer.get("/api/v1/telemetry/alerts/?state=open").json()
    deleted = operator.delete(f"/api/v1/telemetry/alerts/{body['results'][0]['id']}/")

    assert [(a["rule"], a["metric"], a["state"]) for a in body["results"]] == [
        ("ttft", "ttft_p90", "open")]  # fmt: skip
    assert deleted.status_code == 405
    assert Alert.objects.count() == 1
