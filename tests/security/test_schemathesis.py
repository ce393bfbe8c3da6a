"""Schemathesis against the whole API, as an operator, with a fixed seed: every operation gets
generated requests (at least ``MIN_CASES`` in all), none may answer 5xx and every response must
match what the schema says it returns (``/api/schema/``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, seed, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from tests import factories

SEED = 20261130
MIN_CASES = 2000
EXAMPLES_PER_OPERATION = int(os.environ.get("PDD_SCHEMATHESIS_EXAMPLES", "40"))
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]

pytestmark = pytest.mark.django_db


@pytest.fixture
def _keep_test_connection() -> Iterator[None]:
    """A real WSGI handler closes the database connection after each request, which would
    close the test's transaction; Django's own test client disconnects the same signals."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def _queued_plans_stay_queued(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans created by generated requests go to the (unconsumed) in-memory broker instead of
    computing in background threads: this test is about the API, not the planner."""
    from controlplane.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", False)


@pytest.fixture
def world(db: Any) -> None:
    model = factories.model_profile(slug="model-x")
    factories.site(slug="dc-b")
    factories.tenant(slug="acme", name="Acme")
    factories.price_book(model=model)


@pytest.mark.timeout(3600)  # about 2,500 requests; minutes on a loaded CI machine
def test_every_operation_answers_what_the_schema_says(
    issue_token: Any, world: None, _keep_test_connection: None, _queued_plans_stay_queued: None
) -> None:
    headers = {"Authorization": f"Bearer {issue_token('operator')}"}
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", get_wsgi_application(), headers=headers
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    cases = 0

    for operation in operations:

        @seed(SEED)
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        def run(case: Any) -> None:
            nonlocal cases
            cases += 1
            response = case.call(headers=headers)
            try:
                case.validate_response(response, checks=CHECKS)
            except (Failure, FailureGroup) as exc:
                failures.append(f"{case.method} {case.formatted_path} -> "
                                f"{response.status_code}: {str(exc)[:300]}")  # fmt: skip

        run()

    assert failures == []
    assert cases >= MIN_CASES
