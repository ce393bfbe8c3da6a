"""Factories for inventory objects with valid, round-number defaults; override what matters."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import count
from typing import Any

from controlplane.core.services import model_create
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site

_seq = count(1)


def site(**kw: Any) -> Site:
    n = next(_seq)
    data = {"slug": f"site-{n}", "name": f"Site {n}", "region": "test"}
    return model_create(Site, {**data, **kw})


def chip(**kw: Any) -> ChipModel:
    n = next(_seq)
    data = {
        "slug": f"chip-{n}", "name": f"Chip {n}", "vendor": "Test", "bf16_tflops": 100.0,
        "hbm_gib": 80.0, "hbm_tbps": 2.0, "scaleup_gbytes_per_s": 400.0,
        "scaleout_gbits_per_s": 400.0, "price_per_hour": Decimal("2.0000"), "source": "test",
    }  # fmt: skip
    return model_create(ChipModel, {**data, **kw})


def model_profile(**kw: Any) -> ModelProfile:
    n = next(_seq)
    data = {
        "slug": f"model-{n}", "name": f"Model {n}", "total_params_b": 8.0,
        "active_params_b": 8.0, "layers": 32, "hidden_size": 4096, "attention": "gqa",
        "attention_heads": 32, "kv_heads": 8, "head_dim": 128, "source": "test",
    }  # fmt: skip
    return model_create(ModelProfile, {**data, **kw})


def link(**kw: Any) -> Link:
    n = next(_seq)
    a = kw.pop("source", None) or site()
    b = kw.pop("target", None) or site()
    data = {"slug": f"link-{n}", "kind": "wan", "source": a, "target": b,
            "bandwidth_gbps": 40.0, "rtt_ms": 20.0}  # fmt: skip
    return model_create(Link, {**data, **kw})


def pool(**kw: Any) -> InstancePool:
    n = next(_seq)
    data = {
        "slug": f"pool-{n}", "site": kw.pop("site", None) or site(),
        "chip": kw.pop("chip", None) or chip(), "model": kw.pop("model", None) or model_profile(),
        "role": "P", "chips_per_instance": 1, "instance_count": 2,
    }  # fmt: skip
    return model_create(InstancePool, {**data, **kw})


# --- tenancy -------------------------------------------------------------------------------


def tenant(**kw: Any) -> Any:
    from controlplane.tenancy.models import Tenant

    n = next(_seq)
    return model_create(Tenant, {"slug": f"tenant-{n}", "name": f"Tenant {n}", **kw})


# --- billing -------------------------------------------------------------------------------


def key_prefix_for(tenant_slug: str) -> str:
    """The API key prefix factory records of ``tenant_slug`` carry (``request_record``), and
    the key ``billable_tenant`` gives the tenant has: the key decides whom a record bills."""
    return hashlib.sha256(tenant_slug.encode()).hexdigest()[:12]


def api_key(tenant: Any, **kw: Any) -> Any:
    """A gateway key of ``tenant`` with the prefix its factory records carry, issued in 2020 so
    that records of any instant a test picks were served under it (``HeldKey.held_at``)."""
    from datetime import UTC

    from controlplane.billing.models import ApiKey

    prefix = kw.pop("prefix", None) or key_prefix_for(tenant.slug)
    issued_at = kw.pop("created_at", datetime(2020, 1, 1, tzinfo=UTC))
    data = {"tenant": tenant, "name": f"key-{prefix}", "prefix": prefix,
            "key_hash": hashlib.sha256(prefix.encode()).hexdigest()}  # fmt: skip
    key = model_create(ApiKey, {**data, **kw})
    ApiKey.objects.filter(pk=key.pk).update(created_at=issued_at)  # auto_now_add ignores a value
    key.refresh_from_db()
    return key


def billable_tenant(**kw: Any) -> Any:
    """A tenant, with the key (``api_key``) under which factory records of it are billed."""
    created = tenant(**kw)
    api_key(created)
    return created


def record_world(*tenants: str, models: tuple[str, ...] = ("model-x",)) -> dict[str, Any]:
    """What factory records need to be ingested: each tenant billable (get or create), and
    each model in the inventory. Returns the tenants by slug."""
    from controlplane.billing.models import ApiKey
    from controlplane.tenancy.models import Tenant

    for slug in models:
        if not ModelProfile.objects.filter(slug=slug).exists():
            model_profile(slug=slug)
    out = {}
    for slug in tenants:
        found = Tenant.objects.filter(slug=slug).first() or tenant(slug=slug, name=slug.title())
        if not ApiKey.objects.filter(prefix=key_prefix_for(slug)).exists():
            api_key(found)
        out[slug] = found
    return out


def price_book(**kw: Any) -> Any:
    """USD 2.00 miss / 0.40 hit / 8.00 output per million tokens, from 2020 on, open-ended."""
    from datetime import UTC, datetime

    from controlplane.billing.models import PriceBook

    data = {
        "model": kw.pop("model", None) or model_profile(), "currency": "USD",
        "miss_input_per_mtok": Decimal("2.00"), "hit_input_per_mtok": Decimal("0.40"),
        "output_per_mtok": Decimal("8.00"), "effective_from": datetime(2020, 1, 1, tzinfo=UTC),
    }  # fmt: skip
    return model_create(PriceBook, {**data, **kw})


def request_record(**kw: Any) -> dict[str, Any]:
    """One record as an agent posts it (JSON-ready), 1000 input tokens of which 900 hit,
    served under its tenant's factory key (``key_prefix_for``) by gateway ``gateway``."""
    n = next(_seq)
    data = {
        "request_id": f"req-{n}", "tenant": "acme", "model": "model-x", "site": "dc-a",
        "pipeline": "P-RLD-MD", "arrival_time": "2025-01-10T12:00:00Z",
        "finish_time": "2025-01-10T12:00:05Z", "input_tokens": 1000, "hit_tokens": 900,
        "miss_tokens": 100, "output_tokens": 200, "ttft_s": 0.4, "tpot_s": 0.03,
        "wan_bytes": 5_000_000, "handoff_mode": "one-shot", "rld_tokens": 12,
        "md_tokens": 188, "sla_met": True, "rejected": False, "agent": "gateway",
    }  # fmt: skip
    data["api_key_prefix"] = key_prefix_for(str(kw.get("tenant", data["tenant"])))
    if "finish_time" in kw and "arrival_time" not in kw:
        # A request lasts seconds: arrive 5 s before the chosen finish.
        finish = datetime.fromisoformat(str(kw["finish_time"]).replace("Z", "+00:00"))
        arrival = finish - timedelta(seconds=5)
        data["arrival_time"] = arrival.isoformat().replace("+00:00", "Z")
    return {**data, **kw}


def plan_finished(plan_id: int, timeout_s: float = 300.0) -> Any:
    """The plan once its background job has finished (done or failed), polled from the
    database as a client would poll the API; fails the test after ``timeout_s``."""
    from controlplane.planning.models import Plan

    return _job_finished(Plan, plan_id, timeout_s)


def sweep_finished(sweep_id: int, timeout_s: float = 300.0) -> Any:
    """The sweep once its job has finished (done or failed), as ``plan_finished``."""
    from controlplane.planning.models import Sweep

    return _job_finished(Sweep, sweep_id, timeout_s)


def _job_finished(model: Any, pk: int, timeout_s: float) -> Any:
    import time

    from controlplane.planning.models import PlanStatus

    deadline = time.monotonic() + timeout_s
    while True:
        job = model.objects.get(pk=pk)
        if job.status in {PlanStatus.DONE, PlanStatus.FAILED}:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"{model.__name__} {pk} still {job.status} after {timeout_s} s")
        time.sleep(0.2)


def rollout_world(
    result: dict[str, Any], agents: list[tuple[Any, ...]], *, version: int = 2
) -> Any:
    """Sites dc-a and dc-b, chip h800, ``result`` as the active plan at config ``version``, and
    ``agents``: ``(name, site slug, role, state, pool)``, heard from now, or with a sixth item,
    that many seconds ago. Returns the plan."""
    from django.utils import timezone

    from controlplane.agents.models import Agent
    from controlplane.planning.models import Plan, PlanStatus

    sites = {
        slug: site(slug=slug, name=slug.upper().replace("-", " ")) for slug in ("dc-a", "dc-b")
    }
    chip(slug="h800", name="H800")
    now = timezone.now()
    plan = Plan.objects.create(
        scenario="small.toml", inputs={}, status=PlanStatus.DONE, version=version, active=True,
        activated_at=now, result=result,
    )  # fmt: skip
    for name, slug, role, state, pool, *ago in agents:
        heard = now - timedelta(seconds=ago[0] if ago else 0)
        Agent.objects.create(name=name, site=sites[slug], role=role, state=state, pool=pool,
                             last_heartbeat_at=heard)  # fmt: skip
    return plan
