"""Who may report usage: an agent token reports only its own site's records, each written by a
gateway agent registered there, billing only tenants whose keys that gateway held when the
request arrived. Every refusal is that record's own error: the good ones are kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.agents.models import Agent
from controlplane.billing.models import ApiKey, UsageRecord
from controlplane.telemetry.models import RequestRecord
from controlplane.tenancy.models import Tenant
from tests import factories

pytestmark = pytest.mark.django_db
ARRIVAL = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)
URL = "/api/v1/telemetry/records/"


def record(request_id: str, site: str = "dc-a", **kw: Any) -> dict[str, Any]:
    tenant = kw.pop("tenant", "acme")
    return {
        "request_id": request_id, "tenant": tenant, "model": "model-x", "site": site,
        "api_key_prefix": factories.key_prefix_for(tenant), "agent": "gw-a",
        "pipeline": "P-MD", "arrival_time": "2026-11-02T10:00:00Z",
        "finish_time": "2026-11-02T10:00:03Z", "input_tokens": 1000, "hit_tokens": 900,
        "miss_tokens": 100, "output_tokens": 50, "ttft_s": 0.4, "tpot_s": 0.02, "sla_met": True,
        **kw,
    }  # fmt: skip


@pytest.fixture
def world(site_a: Any, site_b: Any) -> dict[str, Tenant]:
    """Sites A and B, each with its gateway (and A with a prefill agent); tenants acme and
    globex with their keys; dormant (inactive, with a key)."""
    Agent.objects.create(name="gw-a", site=site_a, role="gateway")
    Agent.objects.create(name="p-a", site=site_a, role="prefill")
    Agent.objects.create(name="gw-b", site=site_b, role="gateway")
    tenants = factories.record_world("acme", "globex", "dormant")
    Tenant.objects.filter(slug="dormant").update(is_active=False)
    return tenants


def post(client: APIClient, *records: dict[str, Any]) -> Any:
    return client.post(URL, {"records": list(records)}, format="json")


def test_records_of_another_site_are_refused_one_by_one(agent_a: APIClient, world: Any) -> None:
    response = post(agent_a, record("r-1"), record("r-2", "dc-b", agent="gw-b"), record("r-3"))

    assert response.status_code == 200
    assert response.json() == {
        "accepted": 2,
        "duplicates": 0,
        "errors": {"1": {"site": ["This agent token reports for site 'dc-a' only."]}},
    }
    assert set(RequestRecord.objects.values_list("request_id", flat=True)) == {"r-1", "r-3"}


def test_a_batch_only_of_another_site_gets_400_and_stores_nothing(
    agent_a: APIClient, world: Any
) -> None:
    response = post(agent_a, record("r-1", "dc-b"), record("r-2", "dc-b"))

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["records"] == {
        "0": {"site": ["This agent token reports for site 'dc-a' only."]},
        "1": {"site": ["This agent token reports for site 'dc-a' only."]},
    }
    assert RequestRecord.objects.count() == 0


@pytest.mark.parametrize("writer", ["p-a", "gw-b", "", "nobody"])
def test_usage_is_accepted_only_from_a_gateway_agent_of_the_tokens_site(
    agent_a: APIClient, world: Any, writer: str
) -> None:
    response = post(agent_a, record("r-1", agent=writer), record("r-2"))

    assert response.status_code == 200
    assert response.json()["errors"] == {
        "0": {"agent": ["Records are accepted only from a gateway agent registered in site "
                        f"'dc-a'; {writer!r} is not one."]}
    }  # fmt: skip
    assert list(UsageRecord.objects.values_list("request_id", flat=True)) == ["r-2"]


def _revoked_before_arrival(world: Any) -> dict[str, Any]:
    ApiKey.objects.filter(tenant__slug="globex").update(revoked_at=ARRIVAL - timedelta(hours=1))
    return {"tenant": "globex"}


def _expired_before_arrival(world: Any) -> dict[str, Any]:
    ApiKey.objects.filter(tenant__slug="globex").update(expires_at=ARRIVAL - timedelta(hours=1))
    return {"tenant": "globex"}


def _issued_after_arrival(world: Any) -> dict[str, Any]:
    ApiKey.objects.filter(tenant__slug="globex").update(created_at=ARRIVAL + timedelta(hours=1))
    return {"tenant": "globex"}


NOT_HELD = ["Key '{prefix}' was not on the gateways when the request arrived (not yet issued, "
            "or revoked or expired by then)."]  # fmt: skip
REFUSALS = {
    "no key": (lambda w: {"api_key_prefix": ""}, {"api_key_prefix": [
        "Required: the prefix of the gateway key the request was served under (it decides "
        "whom the request bills)."]}),
    "another tenant's key": (
        lambda w: {"tenant": "globex", "api_key_prefix": factories.key_prefix_for("acme")},
        {"api_key_prefix": ["No API key '{acme}' for this tenant."]}),
    "an unknown key": (lambda w: {"api_key_prefix": "abcdef"},
                       {"api_key_prefix": ["No API key 'abcdef' for this tenant."]}),
    "an inactive tenant": (lambda w: {"tenant": "dormant"}, {"tenant": [
        "Tenant 'dormant' is inactive: no gateway holds its keys."]}),
    "a key revoked before": (_revoked_before_arrival, {"api_key_prefix": NOT_HELD}),
    "a key expired before": (_expired_before_arrival, {"api_key_prefix": NOT_HELD}),
    "a key issued after": (_issued_after_arrival, {"api_key_prefix": NOT_HELD}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSALS))
def test_an_agent_token_cannot_bill_a_tenant_whose_keys_its_gateway_does_not_hold(
    agent_a: APIClient, world: Any, case: str
) -> None:
    change, expected = REFUSALS[case]
    fields = change(world)
    bad = record("r-bad", **fields)

    response = post(agent_a, bad, record("r-good"))

    assert response.status_code == 200
    prefix = bad["api_key_prefix"]
    wanted = {name: [m.format(prefix=prefix, acme=factories.key_prefix_for("acme"))
                     for m in messages] for name, messages in expected.items()}  # fmt: skip
    assert response.json()["errors"] == {"0": wanted}
    assert list(UsageRecord.objects.values_list("request_id", flat=True)) == ["r-good"]
    assert list(RequestRecord.objects.values_list("request_id", flat=True)) == ["r-good"]


def test_a_key_revoked_after_the_request_arrived_still_bills_it(
    agent_a: APIClient, world: Any
) -> None:
    # served while the gateways held the key; reported after the revocation
    ApiKey.objects.filter(tenant__slug="globex").update(revoked_at=ARRIVAL + timedelta(seconds=1))

    response = post(agent_a, record("r-1", tenant="globex"))

    assert response.json() == {"accepted": 1, "duplicates": 0, "errors": {}}
    assert UsageRecord.objects.get(request_id="r-1").tenant.slug == "globex"
