"""seed_demo loads the same catalog files pdd_core reads, idempotently."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from controlplane.inventory.management.commands.seed_demo import DEMO_TOPOLOGY
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site
from controlplane.inventory.selectors import topology_snapshot
from pdd_core.specs import PoolSpec, load_chips, load_models

pytestmark = pytest.mark.django_db

REQUIRED_CHIPS = {"h100-sxm", "h200", "h20", "h800", "a100-80g", "a800", "l20", "l40s", "b200",
                  "mi300x", "mi325x", "gaudi-3", "ascend-910b", "ascend-910c"}  # fmt: skip
REQUIRED_MODELS = {"deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "llama-3.1-70b", "glm-4.5",
                   "deepseek-v4", "tiny-test"}  # fmt: skip


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (ChipModel, ModelProfile, Site, Link, InstancePool))


def test_seed_demo_is_idempotent_and_matches_the_catalog() -> None:
    call_command("seed_demo", stdout=io.StringIO())
    first = _counts()
    call_command("seed_demo", stdout=io.StringIO())

    assert _counts() == first
    assert set(ChipModel.objects.values_list("slug", flat=True)) == set(load_chips())
    assert set(ModelProfile.objects.values_list("slug", flat=True)) == set(load_models())
    assert set(load_chips()) >= REQUIRED_CHIPS
    assert set(load_models()) >= REQUIRED_MODELS
    assert all(ChipModel.objects.values_list("source", flat=True))


def test_database_and_catalog_give_the_same_specs() -> None:
    call_command("seed_demo", stdout=io.StringIO())

    topology = topology_snapshot()

    assert topology.chips == load_chips()
    assert dict(topology.models) == load_models()
    assert topology.models["deepseek-v3"].kv_bytes_per_token == 70272  # 61 x (512 + 64) x 2
    assert topology.models["llama-3.1-70b"].kv_bytes_per_token == 327680  # 2 x 80 x 8 x 128 x 2
    assert {p.role.value for p in topology.pools} == {"P", "RLD", "MD"}
    wan = [x for x in topology.links if x.kind.value == "wan"]
    assert len(wan) == 1 and wan[0].source_site != wan[0].target_site


def test_seed_demo_operator_login(client: Any) -> None:
    call_command(
        "seed_demo", "--operator", "demo", "--password", "demo-pass-1", stdout=io.StringIO()
    )

    response = client.post("/accounts/login/", {"username": "demo", "password": "demo-pass-1"})
    assert response.status_code == 302
    page = client.get("/topology/")  # the inventory at a glance; "/" is the live overview
    assert page.status_code == 200
    assert b"Datacenter A" in page.content
    assert b"H800" in page.content


def test_seeded_pools_keep_the_demo_topologys_whole_instance_shape() -> None:
    """A tp 8 x pp 2 pool is stored and read back as tp 8 x pp 2 (16 chips an instance)."""
    raw = json.loads(DEMO_TOPOLOGY.read_text())
    call_command("seed_demo", stdout=io.StringIO())
    expected = {
        (p["site"], p["role"], p["chip"]): PoolSpec(
            site=p["site"], chip=p["chip"], model=p["model"], role=p["role"],
            instances=p["instances"], tp=p.get("tp", 1), pp=p.get("pp", 1), dp=p.get("dp", 1),
            ep=p.get("ep", 1),
        )
        for p in raw["pools"]
    }  # fmt: skip
    stored = {(p.site.slug, p.role, p.chip.slug): p for p in InstancePool.objects.all()}

    assert {k: p.to_spec() for k, p in stored.items()} == expected
    assert any(spec.pp > 1 for spec in expected.values())
    assert {k: p.chip_count for k, p in stored.items()} == {
        k: spec.chips_per_instance * spec.instances for k, spec in expected.items()
    }
