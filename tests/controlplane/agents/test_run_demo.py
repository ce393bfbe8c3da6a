"""``manage.py run_demo``: the database part of ``make demo`` (stable secrets, reset, showcase)
and its fail-fast check of the ports it needs."""

from __future__ import annotations

import io
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.accounts.models import ApiToken
from controlplane.billing.models import ApiKey, PriceBook
from controlplane.billing.services import api_key_revoke
from controlplane.telemetry.models import SlaRule
from pdd_core.keys import hash_key

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings: Any, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    return tmp_path


def setup(*extra: str) -> dict[str, str]:
    out = io.StringIO()
    call_command(
        "run_demo", "--setup-only", "--operator", "admin", "--password", "pw", *extra, stdout=out
    )
    pairs = (line.partition(": ") for line in out.getvalue().splitlines() if ": " in line)
    return {key: value for key, _, value in pairs}


def _active_agent_hashes() -> list[tuple[str, str]]:
    tokens = ApiToken.objects.filter(scope="agent", revoked_at=None).select_related("site")
    return sorted((t.site.slug, t.key_hash) for t in tokens if t.site is not None)


def test_first_setup_issues_a_tenant_key_and_site_bound_agent_tokens() -> None:
    first = setup()

    active_keys = ApiKey.objects.filter(tenant__slug="demo", revoked_at=None)
    assert [k.key_hash for k in active_keys] == [hash_key(first["api key"])]
    assert _active_agent_hashes() == [
        ("dc-a", hash_key(first["agent token dc-a"])),
        ("dc-b", hash_key(first["agent token dc-b"])),
    ]


def test_a_restart_keeps_the_same_key_and_tokens(data_dir: Path) -> None:
    first = setup()
    second = setup()

    assert second == first
    assert ApiKey.objects.filter(revoked_at__isnull=False).count() == 0
    assert ApiToken.objects.filter(revoked_at__isnull=False).count() == 0
    mode = stat.S_IMODE((data_dir / "demo" / "secrets.json").stat().st_mode)
    assert mode == 0o600


def test_a_revoked_saved_key_is_replaced_and_stays_revoked() -> None:
    first = setup()
    api_key_revoke(api_key=ApiKey.objects.get(key_hash=hash_key(first["api key"])))

    second = setup()

    assert second["api key"] != first["api key"]
    assert second["agent token dc-a"] == first["agent token dc-a"]
    active = ApiKey.objects.filter(tenant__slug="demo", revoked_at=None)
    assert [k.key_hash for k in active] == [hash_key(second["api key"])]


def test_a_lost_secrets_file_gets_fresh_secrets_and_revokes_the_old_ones(data_dir: Path) -> None:
    first = setup()
    (data_dir / "demo" / "secrets.json").unlink()

    second = setup()

    assert second["api key"] != first["api key"]
    assert ApiKey.objects.get(key_hash=hash_key(first["api key"])).revoked_at is not None
    assert _active_agent_hashes() == [
        ("dc-a", hash_key(second["agent token dc-a"])),
        ("dc-b", hash_key(second["agent token dc-b"])),
    ]
    assert ApiToken.objects.filter(scope="agent", revoked_at__isnull=False).count() == 2


@pytest.mark.django_db(transaction=True)
def test_reset_starts_over_with_an_empty_database_and_new_secrets() -> None:
    first = setup()
    SlaRule.objects.filter(slug="demo-ttft-p99").update(threshold=99.0)

    second = setup("--reset")

    assert second["api key"] != first["api key"]
    assert ApiKey.objects.count() == 1
    assert ApiToken.objects.count() == 2
    assert SlaRule.objects.get(slug="demo-ttft-p99").threshold == 10.0


def test_setup_seeds_sla_rules_and_a_price_book_for_the_demo_model_once() -> None:
    setup()
    setup()

    assert list(SlaRule.objects.values_list("slug", "metric", "threshold", "window_s")) == [
        ("demo-dead-letters", "dead_letters", 0.0, 60),
        ("demo-tpot-p90", "tpot_p90", 0.5, 60),
        ("demo-tpot-p99", "tpot_p99", 1.0, 60),
        ("demo-ttft-p90", "ttft_p90", 5.0, 60),
        ("demo-ttft-p99", "ttft_p99", 10.0, 60),
    ]
    books = PriceBook.objects.select_related("model")
    assert [(b.model.slug, b.currency) for b in books] == [("deepseek-v3", "USD")]
    book = books.get()
    assert (str(book.miss_input_per_mtok), str(book.hit_input_per_mtok)) == ("2.000000", "0.200000")
    assert str(book.output_per_mtok) == "8.000000"


def test_a_taken_port_stops_the_demo_at_once_naming_it() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        with pytest.raises(CommandError) as caught:
            call_command("run_demo", "--port", str(port), stdout=io.StringIO())

    assert f"port {port} on 127.0.0.1 is taken" in str(caught.value)
    assert ApiKey.objects.count() == 0


def _banner() -> str:
    from controlplane.agents.management.commands.run_demo import Command, Demo
    from controlplane.agents.management.demo import DemoSecrets

    out = io.StringIO()
    options = {"host": "127.0.0.1", "port": 8000, "gateway_port": 8001, "incident_after": 60.0,
               "operator": "admin", "password": "pw", "speed": 5.0}  # fmt: skip
    Demo(Command(stdout=out), DemoSecrets("tk_ab_cd", reused=True), options).banner(
        "http://127.0.0.1:8001"
    )
    return out.getvalue()


def test_the_banner_prints_the_gateway_once_and_a_curl_that_works_as_is() -> None:
    banner = _banner()

    assert "/v1/v1" not in banner
    assert (
        'curl http://127.0.0.1:8001/v1/completions -H "Authorization: Bearer tk_ab_cd" '
        '-d \'{"prompt": "hello", "max_tokens": 8}\''
    ) in banner
    assert "(tenant demo; same as last run)" in banner
    assert "Plan:" not in banner


def test_the_banner_says_when_a_plan_from_an_earlier_run_is_still_active() -> None:
    from controlplane.planning.models import Plan, PlanStatus

    plan = Plan.objects.create(scenario="small.toml", inputs={}, status=PlanStatus.DONE,
                               version=4, active=True)  # fmt: skip

    assert (
        f"  Plan:       plan {plan.pk} (config v4) from an earlier run is still active: the "
        "agents run its routing table. `make demo-reset` starts over."
    ) in _banner()


def _demo_plane() -> dict[str, Any]:
    import json

    from controlplane.agents.management.commands.run_demo import TOPOLOGY

    plane: dict[str, Any] = json.loads(TOPOLOGY.read_text(encoding="utf-8"))
    return plane


def test_the_registered_wan_link_is_the_full_size_line_the_demo_emulates() -> None:
    from controlplane.inventory.models import Link

    setup()

    plane = _demo_plane()
    wan, scale = plane["wan"], plane["engine"]["payload_scale"]
    link = Link.objects.get(kind="wan")
    assert (link.source.slug, link.target.slug) == ("dc-a", "dc-b")
    assert (link.bandwidth_gbps, link.rtt_ms, link.jitter_ms, link.bandwidth_jitter) == (
        pytest.approx(wan["bandwidth_gbps"] / scale), wan["rtt_ms"], wan["jitter_ms"], 0.0,
    )  # fmt: skip
    assert link.bandwidth_gbps == pytest.approx(25.0)
    assert (
        "  WAN:        a 25 Gbps line, 10 ms RTT (emulated at 0.025 Gbps with KV payloads at "
        "0.001 of their size: the same transfer times); the topology page shows this line and "
        "its bytes at full size"
    ) in _banner()


def test_a_saturated_emulated_line_reads_as_a_full_link_on_the_topology_page(
    browser_operator: Any,
) -> None:
    """The journal's WAN bytes (scaled back to full size) over the registered link: the
    emulated line busy for a whole 5 s window shows 100 %, not 0.1 % or 100,000 %; a request
    already in the still-filling window does not make it read as a dip."""
    import re
    from datetime import timedelta
    from unittest import mock

    from django.utils import timezone

    from controlplane.inventory.models import ModelProfile
    from controlplane.telemetry.services import records_ingest
    from pdd_core.agent.gateway.types import real_bytes
    from tests.controlplane.telemetry.conftest import record_at

    setup()
    plane = _demo_plane()
    wire = round(plane["wan"]["bandwidth_gbps"] * 1e9 * 5 / 8)  # the emulated line, 5 s busy
    full = real_bytes(wire, wire, plane["engine"]["payload_scale"])
    # Requests of the demo's model, each shipping the KV of its 60,000 prompt tokens once.
    kv = ModelProfile.objects.get(slug=plane["model"]).to_spec().kv_bytes_per_token
    each = round(60_000 * kv)
    sizes = [each] * (full // each) + [full % each]
    now = timezone.now()
    finish = now - timedelta(seconds=5 + now.timestamp() % 5)  # inside the last complete window
    key = ApiKey.objects.get(tenant__slug="demo", revoked_at=None)
    fields = {"tenant": "demo", "site": "dc-a", "model": plane["model"], "input_tokens": 60_000,
              "hit_tokens": 0, "miss_tokens": 60_000, "api_key_prefix": key.prefix}  # fmt: skip
    records = [record_at(finish, wan_bytes=n, **fields) for n in sizes]
    records.append(record_at(now, wan_bytes=each, **fields))  # the filling window
    result = records_ingest(records=records)
    assert (result.accepted, result.errors) == (len(records), {}), result

    # The page is read at ``now`` (the telemetry selectors' clock held there), so the window
    # holding ``now`` is still filling however long the ingestion and the request take.
    with mock.patch("controlplane.telemetry.selectors.timezone.now", return_value=now):
        html = browser_operator.get("/topology/").content.decode()

    row = re.search(r'<tr data-link="[^"]+" data-source="dc-a" data-capacity="([^"]+)" '
                    r'data-kind="wan">.*?data-gbps="([^"]+)"', html, re.S)  # fmt: skip
    assert row is not None, html
    capacity, gbps = float(row[1]), float(row[2])
    assert capacity == pytest.approx(25.0)
    assert gbps / capacity == pytest.approx(1.0, rel=1e-6)


def test_each_cycle_of_the_pdd_mix_has_fresh_blocks_and_the_sizes_that_route_it(
    tmp_path: Any,
) -> None:
    from controlplane.agents.management.demo_mix import mix_trace
    from pdd_core.routing import RoutingTable
    from pdd_core.workload.readers import read_trace

    table = RoutingTable()
    cycles = [read_trace(mix_trace(tmp_path / f"mix-{n}.jsonl", n)).requests for n in (0, 1)]
    blocks = [{h for r in cycle for h in r.block_hashes} for cycle in cycles]

    assert blocks[0].isdisjoint(blocks[1])  # no prefix of one cycle repeats in the next
    singular, *relayed = cycles[0]
    assert singular.input_tokens >= table.singular_min_input_tokens
    assert singular.output_tokens < table.singular_max_output_tokens
    # Not singular (output too long) and far over the transfer budget on the demo's 25 Gbps line.
    kv_bytes_per_token, line_bytes_per_s = 70_272, 25e9 / 8
    for request in relayed:
        assert request.output_tokens >= table.singular_max_output_tokens
        assert (
            request.input_tokens * kv_bytes_per_token / line_bytes_per_s > table.transfer_budget_s
        )
