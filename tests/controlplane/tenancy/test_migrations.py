"""Tenant moved from billing to tenancy (issue #30) without touching the database: a database
migrated before the move keeps its tenants, and the rows that point at them, as they were."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT_TYPES = ("contenttypes", "0002_remove_content_type_name")
BEFORE = [
    ("billing", "0007_invoice_line_unpriced"),
    ("accounts", "0005_api_token_expiry"),
    ("tenancy", None),
    CONTENT_TYPES,
]
MOVE = [
    ("tenancy", "0001_tenant_from_billing"),
    ("accounts", "0006_api_token_tenant_in_tenancy"),
    ("billing", "0008_tenant_moves_to_tenancy"),
]
AFTER = [*MOVE, CONTENT_TYPES]


def migrate(targets: list[tuple[str, str | None]]) -> Apps:
    """Migrate the test database to ``targets``; the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


@pytest.fixture
def before_the_move() -> Iterator[Apps]:
    """The test database as a database migrated before the move was, then back to the latest."""
    yield migrate(BEFORE)
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_a_tenant_made_before_the_move_is_the_same_row_with_the_same_references(
    before_the_move: Apps,
) -> None:
    old = before_the_move
    old_ct, _ = old.get_model("contenttypes", "ContentType").objects.get_or_create(
        app_label="billing", model="tenant"
    )
    tenant = old.get_model("billing", "Tenant").objects.create(
        slug="acme", name="Acme", currency="EUR"
    )
    old.get_model("billing", "ApiKey").objects.create(
        tenant=tenant, name="k1", prefix="abcd1234", key_hash="0" * 64
    )
    old.get_model("billing", "Invoice").objects.create(
        tenant=tenant, period="2025-01", currency="EUR", total=0, saving=0
    )
    old.get_model("accounts", "ApiToken").objects.create(
        name="acme-billing", scope="billing", prefix="pfx1", key_hash="1" * 64, tenant=tenant
    )

    new = migrate(AFTER)

    moved = new.get_model("tenancy", "Tenant").objects.get()
    assert (moved.pk, moved.slug, moved.name, moved.currency) == (tenant.pk, "acme", "Acme", "EUR")
    assert list(moved.api_keys.values_list("name", flat=True)) == ["k1"]
    assert list(moved.invoices.values_list("period", flat=True)) == ["2025-01"]
    token = new.get_model("accounts", "ApiToken").objects.get(name="acme-billing")
    assert token.tenant_id == moved.pk
    content_type = new.get_model("contenttypes", "ContentType").objects.get(pk=old_ct.pk)
    assert (content_type.app_label, content_type.model) == ("tenancy", "tenant")


def test_the_move_writes_no_schema_sql() -> None:
    """Every step of the move is state only: not a statement for the database to run."""
    executor = MigrationExecutor(connection)
    statements = []
    for app, name in MOVE:
        migration = executor.loader.get_migration(app, name)
        state = executor.loader.project_state((app, name), at_end=False)
        with connection.schema_editor(collect_sql=True, atomic=False) as editor:
            migration.apply(state, editor, collect_sql=True)
        statements += [s for s in editor.collected_sql if not s.startswith("--")]

    assert statements == []
