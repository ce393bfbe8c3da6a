"""No record can poison ingestion: every number is bounded by its model or the clock, a bad
record is its own error (never a 500), ids are unique per site, tenants match their keys."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.billing.models import UsageRecord
from controlplane.billing.services import api_key_create
from controlplane.telemetry.models import RequestRecord, TelemetryRollup
from controlplane.telemetry.rollups import COUNT_MAX, Delta, merge_into
from tests import factories

URL = "/api/v1/telemetry/records/"
pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(db: Any) -> Any:
    """Billable (its factory key); the records' model ``model-x`` is each test's own."""
    return factories.billable_tenant(slug="acme", name="Acme")


@pytest.fixture
def model_x(db: Any) -> Any:
    return factories.model_profile(slug="model-x")


def _now_record(**kw: Any) -> dict[str, Any]:
    finish = timezone.now() - timedelta(seconds=30)
    return factories.request_record(finish_time=finish.isoformat().replace("+00:00", "Z"), **kw)


def _post(agent: Any, records: list[dict[str, Any]]) -> Any:
    return agent.post(URL, {"records": records}, format="json")


def test_wan_bytes_past_the_bigint_range_is_refused_and_later_batches_still_ingest(
    agent: Any, acme: Any, model_x: Any
) -> None:
    poison = _now_record(request_id="poison", wan_bytes=9223372036854775807)

    first = _post(agent, [poison, _now_record(request_id="good-1")])
    second = _post(agent, [_now_record(request_id="good-2", wan_bytes=10**8)])

    assert first.status_code == 200
    assert set(first.json()["errors"]) == {"0"}
    assert list(first.json()["errors"]["0"]) == ["wan_bytes"]
    assert second.json() == {"accepted": 1, "duplicates": 0, "errors": {}}
    assert RequestRecord.objects.filter(request_id__startswith="good").count() == 2


def test_wan_bytes_are_bounded_by_the_models_kv_bytes_per_token(agent: Any, acme: Any) -> None:
    model = factories.model_profile(slug="model-x")  # 32 layers x 8 kv heads x 128 x 2 x 2 B
    per_token = model.kv_bytes_per_token
    tokens = 1200  # the factory's 1000 input + 200 output
    # Each of the 3 attempts a gateway may make sends the whole context's KV (plus 64 bytes a
    # token of block framing) and 1 MiB of control frames (pdd_core.records).
    ceiling = 3 * (tokens * (per_token + 64) + (1 << 20))

    at_limit = _post(agent, [_now_record(request_id="at", wan_bytes=ceiling)])
    over = _post(agent, [_now_record(request_id="over", wan_bytes=ceiling + 1)])

    assert (per_token, at_limit.status_code, over.status_code) == (131072.0, 200, 400)
    assert list(over.json()["error"]["fields"]["records"]["0"]) == ["wan_bytes"]


def test_tokens_are_bounded_by_the_context_window(agent: Any, acme: Any) -> None:
    factories.model_profile(slug="model-x", max_context=1100)

    response = _post(agent, [_now_record(request_id="long")])  # 1000 in + 200 out

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["records"]["0"] == {
        "input_tokens": [
            "input_tokens + output_tokens = 1200 exceeds the context window of 'model-x' "
            "(1100 tokens)."
        ]
    }


def test_a_finish_time_in_the_future_is_refused(agent: Any, acme: Any, model_x: Any) -> None:
    record = factories.request_record(
        request_id="future", arrival_time="9999-12-31T23:59:00Z", finish_time="9999-12-31T23:59:59Z"
    )

    response = _post(agent, [record, _now_record(request_id="now")])

    assert response.status_code == 200
    assert list(response.json()["errors"]["0"]) == ["finish_time"]
    assert not TelemetryRollup.objects.filter(start__year=9999).exists()


def test_ttft_longer_than_the_request_is_refused(agent: Any, acme: Any, model_x: Any) -> None:
    response = _post(agent, [_now_record(request_id="slow", ttft_s=3600.0)])  # a 5 s request

    assert list(response.json()["error"]["fields"]["records"]["0"]) == ["ttft_s"]


def test_rollup_counts_saturate_instead_of_overflowing(acme: Any) -> None:
    row = TelemetryRollup(
        window_s=0, scope="all", key="", start=timezone.now(), wan_bytes=COUNT_MAX - 5
    )
    delta = Delta()
    delta.counts["wan_bytes"] = 100

    merge_into(row, delta)

    assert row.wan_bytes == COUNT_MAX


def test_a_conflicting_request_id_of_the_same_site_is_an_error(
    agent: Any, acme: Any, model_x: Any
) -> None:
    original = _now_record(request_id="r-1")
    _post(agent, [original])

    same = _post(agent, [original])
    different = _post(agent, [{**original, "output_tokens": 150, "md_tokens": 138}])

    assert same.json() == {"accepted": 0, "duplicates": 1, "errors": {}}
    assert different.status_code == 400
    assert different.json()["error"]["fields"]["records"]["0"] == {
        "request_id": ["Conflicts with a different record already reported under this request id."]
    }
    assert RequestRecord.objects.get(request_id="r-1").output_tokens == 200


def test_a_conflicting_request_id_inside_one_batch_is_an_error(
    agent: Any, acme: Any, model_x: Any
) -> None:
    original = _now_record(request_id="r-1")

    response = _post(agent, [original, {**original, "output_tokens": 150, "md_tokens": 138}])

    assert response.json()["errors"] == {
        "1": {
            "request_id": [
                "Conflicts with a different record already reported under this request id."
            ]
        }
    }
    assert RequestRecord.objects.get(request_id="r-1").output_tokens == 200


def test_the_same_request_id_in_two_sites_is_two_requests(acme: Any, model_x: Any) -> None:
    from controlplane.telemetry.services import records_ingest

    result = records_ingest(
        records=[
            _now_record(request_id="r-1", site="dc-a"),
            _now_record(request_id="r-1", site="dc-b"),
        ]
    )

    assert (result.accepted, result.errors) == (2, {})
    assert UsageRecord.objects.filter(request_id="r-1").count() == 2


def test_a_record_of_another_tenants_key_is_refused(agent: Any, acme: Any, model_x: Any) -> None:
    globex = factories.tenant(slug="globex", name="Globex")
    globex_key = api_key_create(tenant=globex, name="k").api_key

    response = _post(agent, [_now_record(request_id="r-1", api_key_prefix=globex_key.prefix)])

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["records"]["0"] == {
        "api_key_prefix": [f"No API key {globex_key.prefix!r} for this tenant."]
    }
    assert not UsageRecord.objects.exists()


def test_a_record_of_another_site_is_refused(agent: Any, acme: Any, model_x: Any) -> None:
    factories.site(slug="dc-b")

    response = _post(agent, [_now_record(request_id="r-1", site="dc-b")])

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["records"]["0"] == {
        "site": ["This agent token reports for site 'dc-a' only."]
    }
    assert not RequestRecord.objects.exists()


def test_an_api_key_cannot_be_created_already_expired(operator: Any, acme: Any) -> None:
    response = operator.post(
        "/api/v1/billing/api-keys/",
        {"tenant": "acme", "name": "k", "expires_at": "2020-01-01T00:00:00Z"},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"expires_at": ["Must be in the future."]}
