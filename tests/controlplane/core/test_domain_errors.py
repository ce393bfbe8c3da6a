"""Services raise domain errors; the API layer maps each to the envelope with its status."""

from __future__ import annotations

import pytest

from controlplane.core.errors import api_exception_handler
from controlplane.core.exceptions import ConflictError, DomainError, ForbiddenError
from pdd_core.specs import SpecError


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (ConflictError("Plan 3 is already active."), 409, "conflict"),
        (ForbiddenError("This token is bound to another site."), 403, "permission_denied"),
        (DomainError("Nothing to do."), 400, "invalid"),
    ],
)
def test_a_domain_error_becomes_the_envelope_with_its_status(
    error: DomainError, status: int, code: str
) -> None:
    response = api_exception_handler(error, {})

    assert response is not None
    assert response.status_code == status
    assert response.data == {
        "error": {"status": status, "code": code, "message": error.message, "fields": {}}
    }


def test_a_pdd_core_error_becomes_a_400_with_its_message() -> None:
    error = SpecError("chips.gpu-a.hbm_gb", "must be positive")

    response = api_exception_handler(error, {})

    assert response is not None
    assert response.status_code == 400
    assert response.data == {
        "error": {"status": 400, "code": "invalid", "message": str(error), "fields": {}}
    }


def test_services_do_not_import_the_api_framework() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "controlplane"
    offenders = [
        str(path.relative_to(root))
        for path in root.glob("*/services.py")
        if "rest_framework" in path.read_text(encoding="utf-8")
    ]

    assert offenders == []
