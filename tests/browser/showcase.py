"""A deployment that looks like ``make demo`` after a while, written straight into the database:
the demo inventory and rules (``seed_demo``), seven agents (one restarted three times, one
stale), an hour of request records with every pipeline and handoff mode and a TTFT incident
four to seven minutes ago (its alert opened and resolved by the real evaluator), a plan with a
result, and last month's usage invoiced. The browser tests read it through a real daphne.

Records go through the real ingestion service (``records_ingest``: validation, bounds, rollups,
billing usage), in this process; only the clock of each record is chosen.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.core.management import call_command
from django.utils import timezone

# (pipeline, handoff mode, share of output decoded on RLD) in the mix of ten requests.
MIX = [("P-MD", "", 0.0)] * 5 + [("P-RLD-MD", "one-shot", 0.2)] * 2 + [
    ("P-RLD-MD", "extend-decode", 0.4), ("P-RLD", "", 1.0), ("P-MD", "", 0.0),
]  # fmt: skip
INCIDENT = (timedelta(minutes=7), timedelta(minutes=4))  # before now: from, to
OPERATOR = ("ops", "ops-pass-123")
VIEWER = ("val", "pw-val-123456")
BILLING = ("bill", "pw-bill-123456")
USERS = {"ops": OPERATOR, "val": VIEWER, "bill": BILLING}
PLOTS_DRAWN = "document.querySelectorAll('.js-plotly-plot').length === 6"


@dataclass(frozen=True)
class Showcase:
    """What the tests need to find again."""

    now: datetime
    api_key_prefix: str  # the demo tenant's gateway key
    agent_tokens: dict[str, str]
    plan_id: int
    last_month: str


# The gateway key each tenant's requests are served under (``showcase_seed`` fills it in).
KEYS: dict[str, str] = {}


def record(when: datetime, i: int, *, prefix: str, slow: bool) -> dict[str, Any]:
    """The ``i``-th request of the showcase, finishing at ``when``: a quarter are acme's (under
    acme's key), the rest the demo tenant's under ``prefix``."""
    pipeline, mode, rld = MIX[i % len(MIX)]
    inputs = 2000 + 700 * (i % 9)
    hit = (inputs * (i * 37 % 100)) // 100
    output = 120 + 40 * (i % 6)
    ttft = (6.0 + 1.0 * (i % 7)) if slow else 0.4 + 0.25 * (i % 9)
    tpot = 0.05 + 0.01 * (i % 8)
    rld_tokens = int(output * rld)
    tenant = "demo" if i % 4 else "acme"
    key = prefix if tenant == "demo" else KEYS["acme"]
    iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
    return {
        "request_id": f"show-{when.timestamp():.0f}-{i}", "tenant": tenant,
        "model": "deepseek-v3", "site": "dc-a", "pipeline": pipeline,
        "arrival_time": iso(when - timedelta(seconds=ttft + tpot * output + 0.5)),
        "finish_time": iso(when), "input_tokens": inputs, "hit_tokens": hit,
        "miss_tokens": inputs - hit, "output_tokens": output, "ttft_s": ttft, "tpot_s": tpot,
        "wan_bytes": 0 if pipeline == "P-RLD" else (inputs - hit) * 30_000,
        "handoff_mode": mode, "rld_tokens": rld_tokens, "md_tokens": output - rld_tokens,
        "sla_met": not slow, "rejected": False, "api_key_prefix": key,
    }  # fmt: skip


def _ingest(records: list[dict[str, Any]]) -> None:
    from controlplane.telemetry.services import records_ingest

    for start in range(0, len(records), 500):
        result = records_ingest(records=records[start : start + 500])
        assert not result.errors, result.errors


def traffic(now: datetime, *, prefix: str) -> None:
    """An hour of records: six per 5 s window in the last 15 minutes, two before; slow ones
    during the incident. The alert evaluator runs on each minute of the incident and after."""
    from controlplane.telemetry.alerts import alerts_evaluate

    records = []
    for back in range(5, 3600, 5):
        when = now - timedelta(seconds=back)
        slow = INCIDENT[1] <= timedelta(seconds=back) <= INCIDENT[0]
        for i in range(6 if back <= 900 else 2):
            records.append(record(when - timedelta(seconds=i * 0.5), back + i, prefix=prefix,
                                  slow=slow))  # fmt: skip
    _ingest(records)
    for minutes in (6, 5, 3, 2):
        alerts_evaluate(now=now - timedelta(minutes=minutes))


def _users() -> None:
    from django.contrib.auth import get_user_model

    users = get_user_model()
    for (name, password), group in ((VIEWER, "viewer"), (BILLING, "billing")):
        user = users.objects.create_user(name, password=password)
        user.groups.add(Group.objects.get_or_create(name=group)[0])


def _agents() -> dict[str, str]:
    """The demo plane's agents registered with site tokens; p-1 restarted three times, md-1
    last heard from 30 s ago (stale), every other on config version 1."""
    from controlplane.accounts.services import api_token_issue
    from controlplane.agents.models import Agent
    from controlplane.agents.services import agent_register
    from controlplane.inventory.models import Site

    tokens, issued = {}, {}
    for site in Site.objects.all():
        issued[site.slug] = api_token_issue(name=f"{site.slug}-agents", scope="agent", site=site)
        tokens[site.slug] = issued[site.slug].secret
    plane = [("gateway", "gateway", "dc-a", 8001), ("p-0", "prefill", "dc-a", 41001),
             ("p-1", "prefill", "dc-a", 41002), ("rld-0", "relay", "dc-a", 41003),
             ("wan", "wan", "dc-a", 41006), ("md-0", "main", "dc-b", 41004),
             ("md-1", "main", "dc-b", 41005)]  # fmt: skip
    for name, role, slug, port in plane:
        site = Site.objects.get(slug=slug)
        for _ in range(4 if name == "p-1" else 1):
            agent_register(token=issued[slug].token, site=site, data={
                "name": name, "role": role, "address": f"127.0.0.1:{port}", "engine": "timed",
                "software_version": "0.1.0"})  # fmt: skip
    Agent.objects.update(config_version=1)
    Agent.objects.filter(name="md-1").update(
        last_heartbeat_at=timezone.now() - timedelta(seconds=30)
    )
    return tokens


def _plan() -> int:
    """A finished plan of the small scenario, computed by the real planner (a few seconds)."""
    from controlplane.planning.models import Plan, PlanStatus
    from controlplane.planning.selectors import SCENARIO_DIR
    from pdd_core.planner import inputs_from_scenario, make_plan
    from pdd_core.scenario import load_scenario

    scenario = load_scenario(SCENARIO_DIR / "small.toml")
    result = make_plan(inputs_from_scenario(scenario), lambda fraction, message: None).to_dict()
    plan = Plan.objects.create(scenario="small.toml", status=PlanStatus.DONE, progress=100,
                               result=result, requested_by="ops", inputs={})  # fmt: skip
    return int(plan.pk)


def _last_month(prefix: str, now: datetime) -> str:
    """Usage on three days of last month, then its invoice issued."""
    from controlplane.billing.periods import period_of
    from controlplane.billing.services import invoice_issue
    from controlplane.tenancy.models import Tenant

    month = period_of(period_of(now).start - timedelta(days=1))
    records = [
        record(month.start + timedelta(days=day, hours=10, seconds=i), i, prefix=prefix,
               slow=i % 10 == 0)
        for day in (2, 9, 16) for i in range(40)
    ]  # fmt: skip
    _ingest(records)
    invoice_issue(tenant=Tenant.objects.get(slug="demo"), period=month, issued_by="ops")
    return month.label


def showcase_seed() -> Showcase:
    """Seed everything; the caller holds the database open (``django_db_blocker.unblock``)."""
    from controlplane.billing.models import ApiKey
    from controlplane.billing.services import api_key_create
    from tests import factories

    call_command("seed_demo", "--operator", OPERATOR[0], "--password", OPERATOR[1],
                 stdout=io.StringIO())  # fmt: skip
    _users()
    for slug, name in (("demo", "Demo tenant"), ("acme", "Acme")):
        tenant = factories.tenant(slug=slug, name=name)
        KEYS[slug] = api_key_create(tenant=tenant, name="gateway").api_key.prefix
    # Issued before last month, so the gateways held them when its requests arrived.
    ApiKey.objects.update(created_at=timezone.now() - timedelta(days=90))
    prefix = KEYS["demo"]
    tokens = _agents()
    now = datetime.fromtimestamp(int(timezone.now().timestamp()) // 5 * 5, tz=UTC)
    last_month = _last_month(prefix, now)
    traffic(now, prefix=prefix)
    return Showcase(now=now, api_key_prefix=prefix, agent_tokens=tokens, plan_id=_plan(),
                    last_month=last_month)  # fmt: skip


def elsewhere(django_db_blocker: Any, work: Callable[[], Any]) -> Any:
    """Run ``work`` on a thread of its own, as another process of the control plane would:
    what it broadcasts goes to this test process's channel layer (on the embedded defaults, not
    daphne's), and Playwright's event loop in this thread cannot host Django's sync-to-async
    calls anyway."""
    from django.db import connection

    def run() -> Any:
        try:
            with django_db_blocker.unblock():
                return work()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def ready(page: Any, path: str) -> None:
    """Wait until the page has drawn what its scripts draw (charts, the agents' table)."""
    if page.locator("#overview-data").count():
        page.wait_for_function(PLOTS_DRAWN)
        page.wait_for_selector("#sla-table tbody tr[data-target=all]")
    elif page.locator("#topology-state").count():
        page.wait_for_selector("#agents tbody tr[data-agent]")
    elif page.locator("#bathtub-figure").count():
        page.wait_for_selector("#bathtub-chart.js-plotly-plot")
