"""ReportShipper against a real daphne: every record arrives exactly once across an outage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from controlplane.accounts.services import api_token_issue
from controlplane.agents.models import Agent
from controlplane.billing.models import UsageRecord
from controlplane.telemetry.models import RequestRecord
from pdd_core.agent.control import ControlPlaneClient
from pdd_core.agent.shipper import RecordSource, ReportShipper
from tests import factories
from tests.live_server import ServerProcess

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


class ListSource(RecordSource):
    def __init__(self) -> None:
        self.items: list[Mapping[str, Any]] = []

    def pending(self, limit: int) -> list[Mapping[str, Any]]:
        return self.items[:limit]

    def delivered(self, count: int) -> None:
        del self.items[:count]


def record(i: int, **overrides: Any) -> dict[str, Any]:
    return {
        "request_id": f"req-{i}", "tenant": "acme", "model": "deepseek-v3", "site": "dc-a",
        "pipeline": "P-MD", "arrival_time": "2026-11-02T10:00:00Z",
        "finish_time": "2026-11-02T10:00:03Z", "input_tokens": 1000, "hit_tokens": 900,
        "miss_tokens": 100, "output_tokens": 50, "ttft_s": 0.4, "tpot_s": 0.02,
        "sla_met": True, "api_key_prefix": factories.key_prefix_for("acme"), "agent": "gw",
        **overrides,
    }  # fmt: skip


def _world() -> str:
    """Site dc-a with its gateway ``gw``, tenant acme with its key, the records' model."""
    site = factories.site(slug="dc-a")
    Agent.objects.create(name="gw", site=site, role="gateway")
    factories.record_world("acme", models=("deepseek-v3",))
    return api_token_issue(name="a", scope="agent", site=site).secret


async def test_records_survive_an_outage_and_arrive_exactly_once(server: ServerProcess) -> None:
    token = await sync_to_async(_world)()
    source = ListSource()
    shipper = ReportShipper(
        ControlPlaneClient(server.url, token, timeout_s=10.0), source, batch_size=40,
        idle_s=0.05, first_backoff_s=0.05, max_backoff_s=0.3,
    )  # fmt: skip
    task = asyncio.create_task(shipper.run())
    try:
        source.items.extend(record(i) for i in range(100))
        await _until(lambda: not source.items)

        await asyncio.to_thread(server.stop)
        source.items.extend(record(i) for i in range(100, 250))  # served during the outage
        source.items.extend(record(i) for i in range(50, 60))  # and a retried overlap
        await asyncio.sleep(1.0)
        assert len(source.items) == 160  # kept while the control plane is down

        await asyncio.to_thread(server.start)
        await _until(lambda: not source.items, timeout_s=30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    counts = await sync_to_async(
        lambda: (RequestRecord.objects.count(), UsageRecord.objects.count())
    )()
    assert counts == (250, 250)
    assert (shipper.accepted, shipper.duplicates, shipper.rejected) == (250, 10, 0)


async def test_malformed_records_are_counted_and_the_good_ones_kept(server: ServerProcess) -> None:
    token = await sync_to_async(_world)()
    source = ListSource()
    source.items = [record(1), record(2, hit_tokens=5), record(3, tenant="nobody"), record(4)]
    shipper = ReportShipper(ControlPlaneClient(server.url, token, timeout_s=10.0), source)

    left = await shipper.ship_once()

    assert left == 4
    assert (shipper.accepted, shipper.duplicates, shipper.rejected) == (2, 0, 2)
    ids = await sync_to_async(
        lambda: set(RequestRecord.objects.values_list("request_id", flat=True))
    )()
    assert ids == {"req-1", "req-4"}


async def test_a_batch_rejected_as_invalid_is_set_aside_not_retried(
    server: ServerProcess, tmp_path: Path
) -> None:
    token = await sync_to_async(_world)()
    source = ListSource()
    poison = [record(i, wan_bytes=2**63 - 1) for i in range(3)]
    source.items = [*poison, record(10, wan_bytes=2**63 - 1), record(11)]
    dead = tmp_path / "gw.dead.jsonl"
    shipper = ReportShipper(
        ControlPlaneClient(server.url, token, timeout_s=10.0), source, batch_size=3,
        dead_letter=dead,
    )  # fmt: skip

    whole_batch = await shipper.ship_once()  # all three invalid: a 400
    mixed = await shipper.ship_once()  # one invalid, one good: per-record errors

    set_aside = [json.loads(line) for line in dead.read_text().splitlines()]
    assert (whole_batch, mixed, source.items) == (3, 2, [])
    assert (shipper.accepted, shipper.rejected) == (1, 4)
    assert [entry["record"]["request_id"] for entry in set_aside] == [
        "req-0", "req-1", "req-2", "req-10",
    ]  # fmt: skip
    assert list(set_aside[-1]["error"]) == ["wan_bytes"]


async def _until(check: Any, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
