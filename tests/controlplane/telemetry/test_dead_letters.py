"""Dead letters: every record ingestion refuses is kept with its errors and its agent, counted
per agent (overview, ``/metrics``), alerted on like an SLA, and replayed after a fix once
(idempotent by request id); a good batch writes none."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command

from controlplane.billing.models import UsageRecord
from controlplane.telemetry.alerts import alerts_evaluate
from controlplane.telemetry.dead_letters import dead_letter_counts
from controlplane.telemetry.models import Alert, AlertState, DeadLetter, SlaRule
from tests import factories
from tests.controlplane.telemetry.conftest import T0, record_at

URL = "/api/v1/telemetry/records/"
pytestmark = pytest.mark.django_db


def _post(client: Any, *records: dict[str, Any]) -> Any:
    return client.post(URL, {"records": list(records)}, format="json")


def test_each_refused_record_is_kept_with_its_errors_and_agent(agent: Any, acme: Any) -> None:
    ghost = factories.request_record(request_id="g1", model="ghost")
    garbage = {"request_id": "x" * 200, "tenant": 7}

    response = _post(agent, ghost, factories.request_record(request_id="ok"), garbage)

    assert response.json()["accepted"] == 1
    letters = {d.key: d for d in DeadLetter.objects.all()}
    assert set(letters) == {"g1", next(k for k in letters if k.startswith("sha256:"))}
    kept = letters["g1"]
    assert (kept.site, kept.agent, kept.tenant, kept.model) == ("dc-a", "gateway", "acme", "ghost")
    assert json.loads(kept.record) == ghost
    assert json.loads(kept.errors) == response.json()["errors"]["0"]
    assert kept.replayed_at is None


def test_a_good_batch_writes_no_dead_letter(agent: Any, acme: Any) -> None:
    _post(agent, factories.request_record(request_id="a"), factories.request_record(request_id="b"))

    assert not DeadLetter.objects.exists()


def test_a_record_refused_again_updates_its_letter(agent: Any, acme: Any) -> None:
    ghost = factories.request_record(request_id="g1", model="ghost")
    _post(agent, ghost)
    first = DeadLetter.objects.get()

    _post(agent, {**ghost, "model": "phantom"})

    again = DeadLetter.objects.get()
    assert (again.pk, again.first_seen, again.model) == (first.pk, first.first_seen, "phantom")
    assert again.last_seen >= first.last_seen


def test_counts_per_agent(agent: Any, acme: Any) -> None:
    _post(agent, *[factories.request_record(request_id=f"g{i}", model="ghost") for i in range(3)])

    (count,) = dead_letter_counts()

    assert (count.site, count.agent, count.pending, count.total) == ("dc-a", "gateway", 3, 3)


def test_replay_after_the_fix_bills_once_and_replaying_again_changes_nothing(
    agent: Any, operator: Any, acme: Any
) -> None:
    ghosts = [factories.request_record(request_id=f"g{i}", model="ghost") for i in range(3)]
    _post(agent, *ghosts)
    still_bad = factories.request_record(request_id="bad", model="ghost", tenant="nobody")
    _post(agent, still_bad)
    factories.model_profile(slug="ghost")  # the fix: the model joins the inventory

    first = operator.post("/api/v1/telemetry/dead-letters/replay/", {}, format="json")
    again = operator.post("/api/v1/telemetry/dead-letters/replay/", {}, format="json")

    assert first.json() == {"accepted": 3, "duplicates": 0, "refused": 1}
    assert again.json() == {"accepted": 0, "duplicates": 0, "refused": 1}
    assert sorted(UsageRecord.objects.values_list("request_id", flat=True)) == ["g0", "g1", "g2"]
    pending = DeadLetter.objects.filter(replayed_at__isnull=True).get()
    assert pending.key == "bad"
    assert json.loads(pending.errors) == {"tenant": ["Unknown tenant 'nobody'."]}
    assert [(c.pending, c.total) for c in dead_letter_counts()] == [(1, 4)]


def test_a_record_the_agent_resent_meanwhile_is_a_duplicate_of_the_replay(
    agent: Any, acme: Any
) -> None:
    ghost = factories.request_record(request_id="g1", model="ghost")
    _post(agent, ghost)
    factories.model_profile(slug="ghost")
    _post(agent, ghost)  # accepted now, sent again from the agent's own file

    out = io.StringIO()
    call_command("replay_dead_letters", stdout=out)

    assert out.getvalue().splitlines()[-1] == "accepted 0, already stored 1, refused again 0"
    assert UsageRecord.objects.filter(request_id="g1").count() == 1
    assert DeadLetter.objects.get().replayed_at is not None


@pytest.mark.parametrize("persona", ["viewer", "billing_client", "agent"])
def test_only_operators_replay(request: pytest.FixtureRequest, acme: Any, persona: str) -> None:
    client = request.getfixturevalue(persona)
    _post(request.getfixturevalue("agent"), factories.request_record(model="ghost"))

    response = client.post("/api/v1/telemetry/dead-letters/replay/", {}, format="json")

    assert response.status_code == 403
    assert DeadLetter.objects.get().replayed_at is None


@pytest.mark.parametrize("ids", [[2**63], [2**64], [1, 2**80]])
def test_an_id_beyond_the_column_is_a_field_error(operator: Any, ids: list[int]) -> None:
    response = operator.post("/api/v1/telemetry/dead-letters/replay/", {"ids": ids}, format="json")

    assert response.status_code == 400
    assert "ids" in response.json()["error"]["fields"]


def test_the_list_shows_the_record_and_its_errors(agent: Any, viewer: Any, acme: Any) -> None:
    ghost = factories.request_record(request_id="g1", model="ghost")
    _post(agent, ghost)

    body = viewer.get("/api/v1/telemetry/dead-letters/?pending=true&agent=gateway").json()

    (item,) = body["results"]
    assert (item["key"], item["record"], item["pending"]) == ("g1", ghost, True)
    assert list(item["errors"]) == ["model"]


def test_the_dead_letter_rule_alerts_while_records_are_refused(acme: Any) -> None:
    from controlplane.telemetry.services import records_ingest

    SlaRule.objects.create(slug="dl", name="Dead letters", metric="dead_letters", threshold=0,
                           window_s=60)  # fmt: skip
    records_ingest(records=[record_at(T0, model="ghost")])
    DeadLetter.objects.update(last_seen=T0 + timedelta(seconds=10))

    opened = alerts_evaluate(now=T0 + timedelta(minutes=1, seconds=2))
    resolved = alerts_evaluate(now=T0 + timedelta(minutes=2, seconds=2))  # a minute without any

    assert (opened.opened, resolved.resolved) == (1, 1)
    alert = Alert.objects.get()
    assert (alert.state, alert.worst) == (AlertState.RESOLVED, 1.0)


def test_the_overview_lists_the_agents_with_pending_dead_letters(
    agent: Any, browser_operator: Any, acme: Any
) -> None:
    _post(agent, *[factories.request_record(request_id=f"g{i}", model="ghost") for i in range(2)])

    html = browser_operator.get("/").content.decode()

    assert 'data-dead-letters="gateway">gateway (dc-a): 2 pending' in html
