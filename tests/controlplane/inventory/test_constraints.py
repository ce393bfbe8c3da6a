"""Database constraints back up validation: a write that skips ``full_clean`` still fails."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from controlplane.inventory.models import Link
from tests import factories

pytestmark = pytest.mark.django_db


def test_wan_link_to_itself_is_refused_by_the_database() -> None:
    site = factories.site()

    with pytest.raises(IntegrityError), transaction.atomic():
        Link.objects.create(
            slug="loop", kind="wan", source=site, target=site, bandwidth_gbps=1, rtt_ms=1
        )

    assert Link.objects.count() == 0


def test_negative_bandwidth_is_refused_by_the_database() -> None:
    a, b = factories.site(), factories.site()

    with pytest.raises(IntegrityError), transaction.atomic():
        Link.objects.create(slug="neg", kind="wan", source=a, target=b, bandwidth_gbps=-1, rtt_ms=1)

    assert Link.objects.count() == 0


@pytest.mark.postgres
def test_ci_runs_on_postgresql() -> None:
    """In CI the suite must exercise PostgreSQL, not fall back to SQLite."""
    assert connection.vendor == "postgresql"
