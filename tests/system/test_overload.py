"""Overload sheds early: 500 concurrent streaming clients, the excess gets 429 with
Retry-After before any token, and no stream fails once it has started."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator

import pytest

from pdd_core.agent.replay import Result, stream_completion
from pdd_core.agent.supervisor.plane import DataPlane
from tests.system.conftest import ROOT, running_plane

pytestmark = pytest.mark.system
TIMED = ROOT / "fixtures" / "dataplane" / "timed.json"
CLIENTS = 500


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPlane]:
    yield from running_plane(tmp_path_factory.mktemp("overload500"), TIMED)


def test_500_concurrent_streams_shed_the_excess_with_429_and_none_fails_mid_stream(
    plane: DataPlane,
) -> None:
    async def burst() -> list[Result]:
        async def one(n: int) -> Result:
            body = {
                "prompt": [2 + (n * 31 + i) % 4000 for i in range(200)], "max_tokens": 24,
                "stream": True, "stream_options": {"include_usage": True},
                "return_token_ids": True,
            }  # fmt: skip
            return await stream_completion(plane.gateway_url, plane.api_key, body, 120)

        return list(await asyncio.gather(*(one(n) for n in range(CLIENTS))))

    results = asyncio.run(burst())

    statuses = Counter(r.status for r in results)
    assert [r.error for r in results if r.mid_stream] == []
    assert statuses[429] > 0
    assert statuses[200] + statuses[429] == CLIENTS, statuses
    assert all(int(r.retry_after) >= 1 for r in results if r.status == 429)
    assert all(r.output_tokens == 24 for r in results if r.ok)
    journal = plane.run_dir / "journal" / "gateway.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sum(r["rejected"] for r in records) == statuses[429]
    assert all(r["output_tokens"] == 0 for r in records if r["rejected"])
