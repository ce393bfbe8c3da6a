"""Inventory REST: CRUD with an operator token, the permission matrix, validation, conflicts."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site
from tests import factories

pytestmark = pytest.mark.django_db

CHIP = {
    "slug": "test-chip", "name": "Test Chip", "bf16_tflops": 300, "hbm_gib": 64,
    "hbm_tbps": 1.6, "scaleup_gbytes_per_s": 196, "scaleout_gbits_per_s": 200,
    "price_per_hour": "0.80", "source": "test sheet",
}  # fmt: skip


def test_operator_creates_site_chip_wan_link_and_pool(operator: Any) -> None:
    assert operator.post("/api/v1/sites/", {"slug": "a", "name": "A"}).status_code == 201
    assert operator.post("/api/v1/sites/", {"slug": "b", "name": "B"}).status_code == 201
    assert operator.post("/api/v1/chip-models/", CHIP).status_code == 201
    model = factories.model_profile(slug="llama-3.1-8b")

    link = operator.post(
        "/api/v1/links/",
        {
            "slug": "a-b",
            "kind": "wan",
            "source": "a",
            "target": "b",
            "bandwidth_gbps": 40,
            "rtt_ms": 20,
            "jitter_ms": 2,
        },
    )
    pool = operator.post(
        "/api/v1/instance-pools/",
        {
            "slug": "a-p",
            "site": "a",
            "chip": "test-chip",
            "model": "llama-3.1-8b",
            "role": "P",
            "chips_per_instance": 8,
            "instance_count": 3,
        },
    )

    assert link.status_code == 201, link.json()
    assert link.json()["source"] == {"id": Site.objects.get(slug="a").pk, "slug": "a", "name": "A"}
    assert pool.status_code == 201, pool.json()
    assert pool.json()["chip_count"] == 24
    assert pool.json()["model"]["slug"] == model.slug
    detail = operator.get("/api/v1/model-profiles/llama-3.1-8b/")
    assert detail.status_code == 200
    # 2 x 32 layers x 8 kv heads x 128 x 2 bytes, derived, never typed in
    assert detail.json()["kv_bytes_per_token"] == 131072


def test_operator_updates_and_deletes(operator: Any) -> None:
    site = factories.site(slug="x1")

    patched = operator.patch("/api/v1/sites/x1/", {"region": "eu-west"})
    deleted = operator.delete("/api/v1/sites/x1/")

    assert patched.status_code == 200
    assert patched.json()["region"] == "eu-west"
    assert deleted.status_code == 204
    assert not Site.objects.filter(pk=site.pk).exists()


@pytest.mark.parametrize(
    ("persona", "read", "write"),
    [
        ("operator", 200, 201),
        ("viewer", 200, 403),
        ("billing_client", 403, 403),
        ("agent", 403, 403),
        ("outsider", 401, 401),
        ("anonymous", 401, 401),
    ],
)
def test_permission_matrix(
    request: pytest.FixtureRequest, persona: str, read: int, write: int
) -> None:
    client = request.getfixturevalue(persona)

    got_read = client.get("/api/v1/sites/")
    got_write = client.post("/api/v1/sites/", {"slug": "new", "name": "New"})

    assert (got_read.status_code, got_write.status_code) == (read, write)
    assert Site.objects.filter(slug="new").exists() is (write == 201)
    if write != 201:
        assert set(got_write.json()["error"]) == {"status", "code", "message", "fields"}


def test_viewer_cannot_update_or_delete(viewer: Any) -> None:
    factories.site(slug="keep", region="r1")

    assert viewer.patch("/api/v1/sites/keep/", {"region": "r2"}).status_code == 403
    assert viewer.delete("/api/v1/sites/keep/").status_code == 403
    assert Site.objects.get(slug="keep").region == "r1"


def link_body(
    slug: str, kind: str, source: str, target: str, gbps: float, rtt_ms: float
) -> dict[str, Any]:
    """The body of a link POST."""
    return {"slug": slug, "kind": kind, "source": source, "target": target,
            "bandwidth_gbps": gbps, "rtt_ms": rtt_ms}  # fmt: skip


def test_negative_bandwidth_is_400_with_field_error_and_writes_nothing(operator: Any) -> None:
    factories.site(slug="a")
    factories.site(slug="b")

    response = operator.post(
        "/api/v1/links/",
        link_body("bad", "wan", "a", "b", -5, 20),
    )

    assert response.status_code == 400
    body = response.json()["error"]
    assert body["code"] == "invalid"
    assert body["fields"] == {"bandwidth_gbps": ["Must be greater than zero."]}
    assert Link.objects.count() == 0


def test_wan_link_from_a_site_to_itself_is_400(operator: Any) -> None:
    factories.site(slug="a")

    response = operator.post(
        "/api/v1/links/",
        link_body("loop", "wan", "a", "a", 10, 1),
    )

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "target": ["A WAN link joins two different sites."]
    }
    assert Link.objects.count() == 0


def test_rdma_link_is_one_site_fabric(operator: Any) -> None:
    factories.site(slug="a")
    factories.site(slug="b")

    ok = operator.post(
        "/api/v1/links/",
        link_body("fab", "rdma", "a", "a", 400, 0.01),
    )
    bad = operator.post(
        "/api/v1/links/",
        link_body("x", "rdma", "a", "b", 400, 0.01),
    )

    assert ok.status_code == 201
    assert bad.status_code == 400
    assert "target" in bad.json()["error"]["fields"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hbm_gib", 0),
        ("compute_efficiency", 1.5),
        ("memory_efficiency", 0),
        ("price_per_hour", "-1"),
    ],
)
def test_chip_rejects_non_physical_values(operator: Any, field: str, value: Any) -> None:
    response = operator.post("/api/v1/chip-models/", {**CHIP, field: value})

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert ChipModel.objects.count() == 0


def test_model_profile_physics_checked_by_pdd_core(operator: Any) -> None:
    """An MLA model without a latent rank is refused by pdd_core's spec, on the right field."""
    response = operator.post(
        "/api/v1/model-profiles/",
        {
            "slug": "bad-mla",
            "name": "Bad",
            "total_params_b": 10,
            "active_params_b": 10,
            "layers": 4,
            "hidden_size": 512,
            "attention": "mla",
            "attention_heads": 8,
            "kv_heads": 8,
            "head_dim": 64,
            "kv_lora_rank": 0,
            "source": "x",
        },
    )

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "kv_lora_rank": ["an MLA model needs a positive latent rank"]
    }
    assert ModelProfile.objects.count() == 0


def test_deleting_a_site_or_chip_in_use_is_refused_with_names(operator: Any) -> None:
    pool = factories.pool(slug="busy-pool")

    site_response = operator.delete(f"/api/v1/sites/{pool.site.slug}/")
    chip_response = operator.delete(f"/api/v1/chip-models/{pool.chip.slug}/")

    for response in (site_response, chip_response):
        assert response.status_code == 409
        assert "busy-pool" in response.json()["error"]["message"]
    assert Site.objects.filter(pk=pool.site.pk).exists()
    assert ChipModel.objects.filter(pk=pool.chip.pk).exists()


def test_duplicate_slug_is_400(operator: Any) -> None:
    factories.site(slug="dup")

    response = operator.post("/api/v1/sites/", {"slug": "dup", "name": "Other"})

    assert response.status_code == 400
    assert "slug" in response.json()["error"]["fields"]


def test_pool_with_unknown_chip_is_400(operator: Any) -> None:
    site = factories.site()
    model = factories.model_profile()

    response = operator.post(
        "/api/v1/instance-pools/",
        {"slug": "p", "site": site.slug, "chip": "no-such-chip", "model": model.slug, "role": "MD"},
    )

    assert response.status_code == 400
    assert "chip" in response.json()["error"]["fields"]
    assert InstancePool.objects.count() == 0


def test_duplicate_pool_shape_is_400_with_clear_message(operator: Any) -> None:
    pool = factories.pool()

    response = operator.post(
        "/api/v1/instance-pools/",
        {
            "slug": "other",
            "site": pool.site.slug,
            "chip": pool.chip.slug,
            "model": pool.model.slug,
            "role": pool.role,
            "chips_per_instance": 1,
        },
    )

    assert response.status_code == 400
    assert "already exists in this site" in response.json()["error"]["message"]


def test_filters(operator: Any) -> None:
    a = factories.site(slug="fa")
    factories.pool(site=a, role="P")
    factories.pool(site=a, role="MD")
    factories.pool(role="MD")

    by_site = operator.get("/api/v1/instance-pools/?site=fa").json()
    by_role = operator.get("/api/v1/instance-pools/?role=MD").json()
    both = operator.get("/api/v1/instance-pools/?site=fa&role=MD").json()

    assert (by_site["count"], by_role["count"], both["count"]) == (2, 2, 1)


@pytest.mark.parametrize(
    ("url", "make"),
    [
        ("/api/v1/instance-pools/", factories.pool),
        ("/api/v1/links/", factories.link),
        ("/api/v1/sites/", factories.site),
        ("/api/v1/chip-models/", factories.chip),
        ("/api/v1/model-profiles/", factories.model_profile),
    ],
)
def test_list_query_count_does_not_grow_with_rows(
    operator: Any, django_assert_max_num_queries: Any, url: str, make: Any
) -> None:
    for _ in range(12):
        make()
    operator.get(url)  # warm the token's last_used_at

    # token lookup + count + page
    with django_assert_max_num_queries(3):
        response = operator.get(url)

    assert response.status_code == 200
    assert response.json()["count"] == 12


def test_pagination_page_size(operator: Any) -> None:
    for _ in range(5):
        factories.site()

    body = operator.get("/api/v1/sites/?page_size=2").json()

    assert body["count"] == 5
    assert len(body["results"]) == 2
    assert body["next"] is not None


@pytest.mark.parametrize(
    "kind", ["sites", "chip-models", "links", "model-profiles", "instance-pools"]
)
def test_unknown_slug_is_404_in_the_envelope(operator: Any, kind: str) -> None:
    response = operator.get(f"/api/v1/{kind}/no-such-thing/")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
