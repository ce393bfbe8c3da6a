"""The dashboard warns while an agent's journal is close to dropping records not yet shipped."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.agents.models import Agent
from controlplane.agents.selectors import JournalWarning, journal_warnings
from tests import factories

pytestmark = pytest.mark.django_db


def _agent(name: str, remaining: int | None, budget: int = 1000) -> Agent:
    site = factories.Site.objects.get_or_create(slug="dc-a", defaults={"name": "DC A"})[0]
    stats = {} if remaining is None else {
        "journal_budget_remaining_bytes": remaining, "journal_budget_bytes": budget,
    }  # fmt: skip
    return Agent.objects.create(
        name=name, site=site, role="gateway", last_heartbeat_at=timezone.now(), stats=stats
    )


def test_only_agents_below_a_quarter_of_their_budget_are_warned_about() -> None:
    _agent("gw-full", 100)
    _agent("gw-ok", 250)
    _agent("gw-silent", None)

    assert journal_warnings() == [
        JournalWarning(agent="gw-full", site="dc-a", remaining_bytes=100, budget_bytes=1000)
    ]


def test_the_overview_page_shows_the_warning(browser_operator: Any) -> None:
    _agent("gw-full", 100)

    page = browser_operator.get("/").content.decode()

    assert 'data-journal-warning="gw-full"' in page
    assert "100\xa0bytes of 1000\xa0bytes left" in page
