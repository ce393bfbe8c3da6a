"""One truthful record per request through faults, a control-plane outage and absurd requests.

Real processes on the test database: daphne, and a timed data plane (``DataPlane``: gateway,
two P, one RLD, two MD, the WAN line, over mutual TLS) joined to it. Under a replay of the
Mooncake sample at native prompt sizes, one MD and then the relay are killed (``pdd up``'s
supervisor restarts them); requests asking for ``max_tokens`` 10^9 and 2^64 come in beside
them; then the control plane goes down and the gateway is restarted while it is down, and
clients keep calling with the control plane's key. Afterwards:

- every request the client saw succeed is in usage, with its prompt, cached and output tokens;
- every failure the client saw is a record with ``sla_met`` false (and its error);
- the absurd requests were refused up front (400) and left no record;
- no control-plane key was refused during the outage, and the key the control plane had
  replaced (``pdd up``'s local one) was refused after the restart as before it;
- ``gateway.dead.jsonl`` is empty: ingestion took every record the gateway wrote.

Every wait is bounded; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from controlplane.billing.models import UsageRecord
from controlplane.inventory.services import catalog_seed
from controlplane.telemetry.models import RequestRecord
from pdd_core.agent.replay import Result, replay, stream_completion
from pdd_core.agent.supervisor.plane import DataPlane
from pdd_core.workload.readers import read_trace
from tests.controlplane.agents.test_dataplane_joined import _until, _world
from tests.live_server import ROOT, ServerProcess
from tests.system.conftest import tracebacks

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]
TOPOLOGY = ROOT / "fixtures" / "dataplane" / "timed.json"
TRACE = ROOT / "fixtures" / "traces" / "mooncake_conversation_sample.jsonl"
REQUESTS = 40  # the sample's first 40 (6K-40K tokens, 19.5 s of arrivals), at twice its speed
SPEED = 2.0


def call(gateway: str, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        gateway + "/v1/completions", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def replayed(gateway: str, key: str) -> list[Result]:
    requests = read_trace(TRACE).requests[:REQUESTS]
    summary = asyncio.run(replay(
        list(requests), gateway=gateway, api_key=key, model="deepseek-v3", speed=SPEED,
        block_tokens=512, output_scale=1.0, max_output=0, timeout_s=180,
    ))  # fmt: skip
    return summary.results


def test_faults_an_outage_and_absurd_requests_leave_one_truthful_record_each(
    server: ServerProcess, tmp_path: Path
) -> None:
    world = _world()
    catalog_seed()  # the inventory knows the served model (its bounds, its prices' model)
    plane = DataPlane(TOPOLOGY, tmp_path / "run", control_plane=server.url, tokens=world.tokens)
    plane.start(timeout_s=120)
    plane.supervise(lambda line: None)
    key, gateway = world.tenant_key, plane.gateway_url
    try:
        _until(lambda: call(gateway, key, {"prompt": "hi", "max_tokens": 2})[0] == 200,
               what="the control plane's key pushed to the gateway")  # fmt: skip
        results: list[Result] = []
        load = threading.Thread(target=lambda: results.extend(replayed(gateway, key)))
        load.start()
        time.sleep(4.0)
        os.kill(plane.pids()["md-1"], signal.SIGKILL)
        absurd = [call(gateway, key, {"prompt": "x", "max_tokens": n}) for n in (10**9, 2**64)]
        time.sleep(5.0)
        os.kill(plane.pids()["rld-0"], signal.SIGKILL)
        load.join(timeout=300)
        assert not load.is_alive()

        # The control plane goes down; the gateway restarts while it is down.
        server.stop()
        before = plane.pids()["gateway"]
        plane.kill("gateway")
        _until(lambda: plane.pids()["gateway"] != before and gateway_up(gateway), 60,
               what="the gateway restarted by the supervisor")  # fmt: skip
        outage = [call(gateway, key, {"prompt": f"outage {n}", "max_tokens": 4}) for n in range(8)]
        replaced = call(gateway, plane.api_key, {"prompt": "stale", "max_tokens": 2})
        outage_stream = asyncio.run(stream_completion(
            gateway, key, {"prompt": "outage stream", "max_tokens": 8, "stream": True,
                           "stream_options": {"include_usage": True}, "return_token_ids": True},
            60))  # fmt: skip
        server.start()
        print(f"\nfaults test: {sum(r.ok for r in results)} of {len(results)} served; failed: "
              f"{[r.error[:60] for r in results if not r.ok]}; outage {[c for c, _ in outage]}, "
              f"stream {outage_stream.ok}, replaced key {replaced[0]}")  # fmt: skip
        records, usage = ingested(results, outage, outage_stream)
        dead = plane.run_dir / "journal" / "gateway.dead.jsonl"
        dead_letters = dead.read_text() if dead.exists() else ""
        journal = [json.loads(line) for line in (dead.parent / "gateway.jsonl").open()]
        print(f"faults test: {sum('attempts' in r for r in journal)} of {len(journal)} journaled "
              "requests resumed on other agents")  # fmt: skip
    finally:
        plane.stop()

    # The client's view.
    assert [status for status, _ in absurd] == [400, 400]
    assert [status for status, _ in outage] == [200] * 8  # no control-plane key refused
    assert outage_stream.ok, outage_stream.error
    assert replaced[0] == 401  # the key the control plane had replaced stays refused
    assert len(results) == REQUESTS
    served = [r for r in results if r.ok] + [outage_stream]
    failed = [r for r in results if not r.ok]
    whole = {body["id"]: body["usage"] for _, body in outage}

    for result in served:
        record, billed = records[result.request_id], usage[result.request_id]
        assert (record.input_tokens, record.hit_tokens, record.output_tokens) == (
            result.prompt_tokens,
            result.cached_tokens,
            result.output_tokens,
        ), result.request_id
        assert (billed.hit_tokens + billed.miss_tokens, billed.output_tokens) == (
            result.prompt_tokens, result.output_tokens)  # fmt: skip
        assert record.rld_tokens + record.md_tokens == record.output_tokens
    for rid, body in whole.items():
        assert (records[rid].input_tokens, records[rid].output_tokens) == (
            body["prompt_tokens"], body["completion_tokens"])  # fmt: skip
        assert usage[rid].output_tokens == body["completion_tokens"]
    for result in failed:
        assert result.request_id, result.error  # every failure names its record
        assert records[result.request_id].sla_met is False, result.error
    assert not any(r.input_tokens + r.output_tokens > 163_840 for r in records.values())
    assert dead_letters == ""
    assert tracebacks(plane.run_dir) == []


def ingested(
    results: list[Result], outage: list[tuple[int, dict[str, Any]]], stream: Result
) -> tuple[dict[str, RequestRecord], dict[str, UsageRecord]]:
    """Every request's record and usage, once the restarted gateway shipped its journal."""
    ids = {r.request_id for r in [*results, stream]} | {body.get("id", "") for _, body in outage}
    ids.discard("")
    _until(lambda: set(RequestRecord.objects.filter(request_id__in=ids)
                       .values_list("request_id", flat=True)) >= ids,
           timeout_s=120, what="every request's record ingested")  # fmt: skip
    records = {r.request_id: r for r in RequestRecord.objects.filter(request_id__in=ids)}
    usage = {u.request_id: u for u in UsageRecord.objects.filter(request_id__in=ids)}
    return records, usage


def gateway_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return bool(all(json.loads(response.read())["agents"].values()))
    except OSError:
        return False
