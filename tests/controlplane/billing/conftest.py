"""Billing fixtures: two tenants on one priced model (each with the key its factory records
are billed under), January 2025 usage ingested for both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controlplane.accounts.services import api_token_issue
from controlplane.billing.models import ApiKey
from controlplane.telemetry.services import records_ingest
from tests import factories


@pytest.fixture
def world(db: Any) -> dict[str, Any]:
    model = factories.model_profile(slug="model-x")
    acme = factories.billable_tenant(slug="acme", name="Acme")
    globex = factories.billable_tenant(slug="globex", name="Globex")
    book = factories.price_book(model=model)
    records = [
        factories.request_record(request_id="a1", finish_time="2025-01-10T12:00:05Z"),
        factories.request_record(request_id="a2", finish_time="2025-01-11T08:00:00Z",
                                 sla_met=False),
        factories.request_record(request_id="a3", finish_time="2025-01-11T09:00:00Z",
                                 hit_tokens=0, miss_tokens=1000),
        factories.request_record(request_id="g1", tenant="globex",
                                 finish_time="2025-01-12T00:00:00Z"),
    ]  # fmt: skip
    result = records_ingest(records=records)
    assert result.accepted == 4
    keys = ApiKey.objects.order_by("prefix")
    return {"model": model, "acme": acme, "globex": globex, "book": book, "records": records,
            "keys": list(keys.values_list("prefix", flat=True)),
            "key_hashes": dict(keys.values_list("key_hash", "tenant__slug"))}  # fmt: skip


@pytest.fixture
def client_for() -> Callable[..., Any]:
    """A client with a fresh token of ``scope``, optionally bound to ``tenant``."""
    from rest_framework.test import APIClient

    counter = iter(range(1000))

    def make(scope: str, tenant: Any = None) -> Any:
        issued = api_token_issue(name=f"t-{next(counter)}", scope=scope, tenant=tenant)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
        return client

    return make
