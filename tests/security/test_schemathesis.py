"""Schemathesis against the whole API, as an operator, with a fixed seed and every check it has.

Every operation gets generated requests, valid ones (positive) and invalid ones (negative), at
least ``MIN_CASES`` in all. None may answer 5xx, every answer must be one the schema documents
(status code, content type, body, headers), invalid input must be refused, and valid input
accepted: a 400 to a schema-valid request passes only when every field it names is one whose
rule the schema cannot state (``SCHEMA_CANNOT_STATE``: references to objects that must exist,
uniqueness, ranges checked across fields), each with its reason.

``PDD_SCHEMATHESIS_EXAMPLES`` (examples per operation and mode, default 40, about 5,700 cases)
lowers the count for a quick run; the floor of cases scales with it.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import RejectedPositiveData

from tests import factories

SEED = 20261130
DEFAULT_EXAMPLES = 40
EXAMPLES_PER_OPERATION = int(os.environ.get("PDD_SCHEMATHESIS_EXAMPLES", str(DEFAULT_EXAMPLES)))
MIN_CASES = 5000 * EXAMPLES_PER_OPERATION // DEFAULT_EXAMPLES

_EXISTS = "must name an existing object (the schema cannot list them)"
_UNIQUE = "must be unique (a generated value may already exist)"
_RANGE = "a physical range or relation the model checks (clean())"
_SHAPE = "a valid instance shape of the model on the chip (TP within the scale-up domain, ...)"
_DATE = "a calendar date-time, and 'to' after 'from'"
_GROUPS = "at most one time bucket, no repeats; hourly buckets over a bounded range"
# Path (any method) -> field -> why a schema-valid value may still be refused with a 400.
SCHEMA_CANNOT_STATE: dict[str, dict[str, str]] = {
    "/api/v1/billing/usage/": {"from": _DATE, "to": _DATE, "group_by": _GROUPS},
    "/api/v1/billing/usage.csv": {"from": _DATE, "to": _DATE, "group_by": _GROUPS},
    "/api/v1/billing/usage-records/": {"from": _DATE, "to": _DATE},
    "/api/v1/billing/api-keys/": {"tenant": _EXISTS},
    "/api/v1/billing/price-books/": {
        "model": _EXISTS,
        "miss_input_per_mtok": _RANGE,
        "hit_input_per_mtok": _RANGE,
        "output_per_mtok": _RANGE,
        "effective_to": _RANGE,
        "non_field_errors": _RANGE,
    },
    "/api/v1/billing/tenants/": {"slug": _UNIQUE, "name": _UNIQUE},
    "/api/v1/sites/": {"slug": _UNIQUE, "name": _UNIQUE},
    "/api/v1/chip-models/": {
        "slug": _UNIQUE,
        "name": _UNIQUE,
        "price_per_hour": _RANGE,
        "non_field_errors": _RANGE,
        # Number filters compare as decimals of the column's precision.
        "bf16_tflops__gte": _RANGE,
        "bf16_tflops__lte": _RANGE,
        "hbm_gib__gte": _RANGE,
        "hbm_gib__lte": _RANGE,
        "price_per_hour__lte": _RANGE,
    },
    "/api/v1/instance-pools/": {
        "slug": _UNIQUE,
        "chip": _EXISTS,
        "model": _EXISTS,
        "site": _EXISTS,
        "chips_per_instance": _SHAPE,
        "pp": _SHAPE,
        "dp": _SHAPE,
        "ep": _SHAPE,
        "non_field_errors": _SHAPE,
    },
    "/api/v1/links/": {
        "slug": _UNIQUE,
        "source": _EXISTS,
        "target": _EXISTS,
        "cost_per_gb": _RANGE,
        "non_field_errors": _RANGE,
    },
    "/api/v1/model-profiles/": {
        "slug": _UNIQUE,
        "name": _UNIQUE,
        "kv_heads": _RANGE,
        "moe_top_k": _RANGE,
        "kv_lora_rank": _RANGE,
        "non_field_errors": _RANGE,
        "active_params_b": _RANGE,
        "total_params_b": _RANGE,
        # Finite figures whose product (KV bytes per token, weight bytes) overflows a float.
        "kv_bytes_per_elem": _RANGE,
        "weight_bytes_per_param": _RANGE,
    },
    "/api/v1/plans/": {"workload": _EXISTS},
    "/api/v1/sweeps/": {"scenarios": "must name shipped scenarios"},
    "/api/v1/telemetry/sla-rules/": {"slug": _UNIQUE, "non_field_errors": _RANGE},
    "/api/v1/workloads/": {
        "minutes": "telemetry must exist in that window (none in the test's database)",
        "file": "a trace in the documented line format",
        "non_field_errors": "exactly one of a trace file or a scenario",
    },
}

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


def refused_fields(response: Any) -> set[str]:
    """The fields a 400 names: the envelope's ``fields``, or the field its CSV row's message
    starts with (``name: ...``)."""
    if Response.from_any(response).headers.get("content-type", [""])[0].startswith("text/csv"):
        row = next(csv.DictReader(io.StringIO(response.text)), {})
        name, sep, _ = (row.get("message") or "").partition(": ")
        return {name} if sep else {"?"}
    return set(response.json()["error"]["fields"]) or {"?"}


def unstatable(path: str, response: Any) -> bool:
    """Whether a 400 to a schema-valid request names only rules the schema cannot state."""
    allowed = SCHEMA_CANNOT_STATE.get(path.replace("{id}/", "").replace("{slug}/", ""), {})
    return response.status_code == 400 and refused_fields(response) <= allowed.keys()


@pytest.mark.timeout(3600)  # about 5,700 requests; minutes on a loaded CI machine
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
    no_negative: list[str] = []

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @seed(SEED)
            @given(case=operation.as_strategy(generation_mode=mode, headers=headers))
            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))  # fmt: skip
            def run(case: Any) -> None:
                nonlocal cases
                cases += 1
                response = case.call(headers=headers)
                try:
                    case.validate_response(response, headers=headers)  # every check
                except (Failure, FailureGroup) as exc:
                    found = exc.exceptions if isinstance(exc, FailureGroup) else [exc]
                    for failure in found:
                        if isinstance(failure, RejectedPositiveData) and unstatable(
                            case.operation.path, response
                        ):
                            continue
                        mode = case.meta.generation.mode.value
                        failures.append(f"{mode} {case.method} {case.formatted_path} "
                                        f"{case.query} -> {response.status_code}: "
                                        f"{str(failure)[:300]} {response.text[:300]}")  # fmt: skip

            try:
                run()
            except Unsatisfiable:
                # Nothing to make invalid: no parameters and no body beyond the fixed token
                # (or only a path segment, which cannot hold what would make it invalid).
                assert mode is GenerationMode.NEGATIVE, operation.label
                no_negative.append(operation.label)

    assert not failures, "\n".join(failures)
    assert cases >= MIN_CASES
    assert len(no_negative) < len(operations) // 3
