"""The models and the migrations agree: ``makemigrations`` has nothing to write (a model change
without its migration would reach a production database only as a failed deploy)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_every_model_change_has_its_migration() -> None:
    out = io.StringIO()

    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)

    assert "No changes detected" in out.getvalue()
