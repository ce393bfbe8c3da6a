"""Schemathesis against /api/schema/: generated requests to every billing operation, as an
operator, a bounded number of examples each; none may answer 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings

MAX_EXAMPLES = 20


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
def operator_schema(
    issue_token: Any, world: Any, _keep_test_connection: None
) -> tuple[Any, dict[str, str]]:
    headers = {"Authorization": f"Bearer {issue_token('operator')}"}
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", get_wsgi_application(), headers=headers
    )
    return schema.include(path_regex=r"^/api/v1/billing/"), headers


def test_billing_operations_never_answer_5xx(operator_schema: tuple[Any, dict[str, str]]) -> None:
    schema, headers = operator_schema
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    failures: list[str] = []

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        def run(case: Any) -> None:
            response = case.call(headers=headers)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        run()

    assert failures == []
