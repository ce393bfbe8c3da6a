"""``pdd up --control-plane`` against a real daphne: every agent registers in its site, a plan
activated over REST reaches and is acknowledged by every running agent, and the gateway's
records arrive exactly once across a control-plane outage under load.

Real processes (daphne, ``pdd up`` and its seven children) on the test database; every wait is
bounded and nothing asserts a duration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controlplane.accounts.services import api_token_issue
from controlplane.agents.models import Agent
from controlplane.billing.services import api_key_create
from controlplane.inventory.services import catalog_seed
from controlplane.planning.models import Plan, PlanStatus
from controlplane.telemetry.models import RequestRecord
from controlplane.tenancy.models import Tenant
from tests import factories
from tests.live_server import ROOT, ServerProcess, up_banner

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]
TOPOLOGY = ROOT / "fixtures" / "dataplane" / "tiny.json"
AGENTS = {"gateway", "p-0", "p-1", "rld-0", "md-0", "md-1", "wan"}


@dataclass
class World:
    operator: str
    tenant_key: str
    tokens: dict[str, str]


@dataclass
class Up:
    proc: subprocess.Popen[str]
    gateway: str
    run_dir: Path


def _world() -> World:
    tokens = {}
    for slug in ("dc-a", "dc-b"):
        site = factories.site(slug=slug)
        tokens[slug] = api_token_issue(name=f"agents-{slug}", scope="agent", site=site).secret
    operator = api_token_issue(name="ops", scope="operator").secret
    catalog_seed(chip_entries=[])  # the plane's model: ingestion refuses records of unknown ones
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    return World(operator, api_key_create(tenant=tenant, name="gw").secret, tokens)


@pytest.fixture
def world(server: ServerProcess) -> World:
    return _world()


@pytest.fixture
def up(server: ServerProcess, world: World, tmp_path: Path) -> Iterator[Up]:
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "pdd_core", "up", str(TOPOLOGY), "--run-dir", str(run_dir),
        "--control-plane", server.url,
    ]  # fmt: skip
    tokens = f"dc-a={world.tokens['dc-a']},dc-b={world.tokens['dc-b']}"  # not in argv (ps)
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, "PDD_CONTROL_TOKENS": tokens},
    )  # fmt: skip
    seen = up_banner(proc, timeout_s=90)
    try:
        assert "pids" in seen, seen
        yield Up(proc, seen["gateway"], run_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _until(check: Callable[[], bool], timeout_s: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not met in {timeout_s} s: {what}")
        time.sleep(0.2)


def _call(method: str, url: str, token: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def _agents() -> dict[str, Agent]:
    return {a.name: a for a in Agent.objects.select_related("site")}


def _all_on(version: int) -> Callable[[], bool]:
    def check() -> bool:
        agents = _agents()
        return set(agents) == AGENTS and all(
            a.config_version == version and a.status == "healthy" for a in agents.values()
        )

    return check


def complete(gateway: str, key: str, n: int) -> str:
    """One completion; returns the response id (the gateway's request id)."""
    body = {"model": "tiny-test", "prompt": f"request {n} of the outage test", "max_tokens": 4}
    request = urllib.request.Request(
        gateway + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(json.loads(response.read())["id"])


def test_every_agent_registers_in_its_site_and_acks_an_activated_plan(
    server: ServerProcess, world: World, up: Up
) -> None:
    _until(_all_on(0), what="all seven agents healthy on version 0")
    agents = _agents()
    assert {n: a.site.slug for n, a in agents.items()} == {
        "gateway": "dc-a", "p-0": "dc-a", "p-1": "dc-a", "rld-0": "dc-a", "wan": "dc-a",
        "md-0": "dc-b", "md-1": "dc-b",
    }  # fmt: skip
    assert {n: a.role for n, a in agents.items()}["md-0"] == "main"
    # The tenant key of the control plane reached the gateway in the first config push.
    assert complete(up.gateway, world.tenant_key, 0).startswith("cmpl-")

    plan = Plan.objects.create(
        scenario="pdd_reference.toml",
        status=PlanStatus.DONE,
        result={
            "feasible": True,
            "model": "tiny-test",
            "routing_table": {"transfer_budget_s": 0.03, "a_future_knob": 1},
            "pools": [{"site": "dc-b", "chip": "h20", "role": "MD", "instances": 2, "tp": 8}],
        },
    )
    out = _call("POST", f"{server.url}/api/v1/plans/{plan.pk}/activate/", world.operator)
    version = int(out["version"])
    assert version >= 1

    _until(_all_on(version), what=f"every agent on version {version}")
    log = (up.run_dir / "gateway.log").read_text()
    assert f"config {version} applied" in log
    assert "ignoring unknown routing keys ['a_future_knob']" in log
    assert complete(up.gateway, world.tenant_key, 1).startswith("cmpl-")


def test_records_arrive_exactly_once_across_a_control_plane_outage(
    server: ServerProcess, world: World, up: Up
) -> None:
    _until(_all_on(0), what="all agents healthy on version 0")
    seen: list[str] = []
    failures: list[str] = []
    stop = threading.Event()
    phase = {"outage": False}
    during_outage: list[str] = []

    def client(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                rid = complete(up.gateway, world.tenant_key, worker * 100_000 + n)
            except (urllib.error.URLError, OSError) as exc:
                failures.append(repr(exc))
                continue
            seen.append(rid)
            if phase["outage"]:
                during_outage.append(rid)

    workers = [threading.Thread(target=client, args=(w,)) for w in range(2)]
    for worker in workers:
        worker.start()
    try:
        _until(lambda: len(seen) >= 20, what="load before the outage")
        server.stop()
        phase["outage"] = True
        _until(lambda: len(during_outage) >= 40, what="load during the outage")
        phase["outage"] = False
        server.start()
        before_end = len(seen)
        _until(lambda: len(seen) >= before_end + 20, what="load after the outage")
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
    assert failures == []

    _until(
        lambda: RequestRecord.objects.count() >= len(set(seen)),
        timeout_s=90,
        what="every served request recorded",
    )
    ids = set(RequestRecord.objects.values_list("request_id", flat=True))
    gateway = Agent.objects.get(name="gateway")
    served = len(seen)

    def drained_and_counted() -> bool:
        # One heartbeat reporting both: an older beat can show an empty journal mid-load.
        beat = Agent.objects.get(name="gateway").stats
        return beat.get("journal_pending") == 0 and beat.get("requests_served") == served

    _until(drained_and_counted, timeout_s=90, what="a heartbeat after the journal drained")
    gateway.refresh_from_db()
    stats = gateway.stats
    print(
        f"\noutage test: served={len(seen)} (unique {len(set(seen))}), "
        f"served during the outage={len(during_outage)}, "
        f"RequestRecord rows={RequestRecord.objects.count()}, "
        f"missing={len(set(seen) - ids)}, extra={len(ids - set(seen))}, "
        f"shipper accepted={stats.get('records_accepted')} "
        f"duplicates={stats.get('records_duplicates')} rejected={stats.get('records_rejected')}, "
        f"journal dropped={stats.get('journal_dropped')}, "
        f"outage reported={gateway.last_outage_started_at is not None}, "
        f"gateway requests_served={stats.get('requests_served')}"
    )
    assert len(seen) == len(set(seen))
    assert ids == set(seen)
    assert RequestRecord.objects.count() == len(seen)
    assert stats["records_rejected"] == 0
    assert stats["requests_served"] == len(seen)
    assert stats["journal_dropped"] == 0
    assert gateway.last_outage_started_at is not None
