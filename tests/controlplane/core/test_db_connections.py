"""Database connections fit ASGI: under 50 concurrent writers and 20 readers a real daphne
process on PostgreSQL answers every request (no "too many clients"), and once the burst is over
its connections return to the baseline (the pool closes what it opened above its minimum)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from controlplane.accounts.services import api_token_issue
from controlplane.agents.models import Agent
from tests import factories
from tests.live_server import ServerProcess, database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS, READERS, REQUESTS_EACH = 50, 20, 4


def _server_connections(db_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [db_name],
        )
        return int(cursor.fetchone()[0])


@pytest.fixture
def pooled_server(tmp_path: Path, django_db_blocker: Any) -> Iterator[ServerProcess]:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    process = ServerProcess(url, tmp_path / "data", tmp_path / "daphne.log")
    process.env.update(PDD_DB_POOL_MIN_SIZE="1", PDD_DB_POOL_MAX_SIZE="8",
                       PDD_DB_POOL_MAX_IDLE_S="1")  # fmt: skip
    process.start()
    yield process
    process.stop()


def _call(url: str, token: str, body: Any = None) -> int:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="POST" if body is not None else "GET",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_concurrent_writers_and_readers_get_no_errors_and_connections_return(
    pooled_server: ServerProcess,
) -> None:
    site = factories.site(slug="dc-a")
    Agent.objects.create(name="gateway", site=site, role="gateway")  # the records' writer
    factories.record_world("acme")
    agent = api_token_issue(name="agent", scope="agent", site=site).secret
    viewer = api_token_issue(name="viewer", scope="viewer").secret
    finish = (timezone.now() - timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    db_name = str(connection.settings_dict["NAME"])
    assert _call(pooled_server.url + "/api/v1/sites/", viewer) == 200
    baseline = _server_connections(db_name)

    def write(writer: int) -> list[int]:
        return [
            _call(pooled_server.url + "/api/v1/telemetry/records/", agent, {"records": [
                factories.request_record(request_id=f"w{writer}-{i}", finish_time=finish)
            ]})
            for i in range(REQUESTS_EACH)
        ]  # fmt: skip

    def read(_: int) -> list[int]:
        return [
            _call(pooled_server.url + "/api/v1/telemetry/summary/", viewer)
            for _ in range(REQUESTS_EACH)
        ]

    samples: list[int] = []
    done = threading.Event()

    def sample() -> None:  # its own database connection, excluded from the count
        while not done.is_set():
            samples.append(_server_connections(db_name))
            time.sleep(0.1)
        connection.close()

    sampler = threading.Thread(target=sample)
    sampler.start()
    with ThreadPoolExecutor(WRITERS + READERS) as pool:
        writes = [pool.submit(write, n) for n in range(WRITERS)]
        reads = [pool.submit(read, n) for n in range(READERS)]
        write_codes = [code for f in writes for code in f.result()]
        read_codes = [code for f in reads for code in f.result()]
    done.set()
    sampler.join()
    deadline = time.monotonic() + 60
    after = _server_connections(db_name)
    while time.monotonic() < deadline and after > baseline:
        time.sleep(0.5)
        after = _server_connections(db_name)

    assert write_codes == [200] * (WRITERS * REQUESTS_EACH)
    assert read_codes == [200] * (READERS * REQUESTS_EACH)
    # the pool grows from its minimum (1, in the baseline) to at most its maximum (8)
    assert max(samples) <= baseline + 8 - 1
    assert after <= baseline
