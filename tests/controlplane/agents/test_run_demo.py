"""``manage.py run_demo --setup-only``: the database part of ``make demo``, idempotent."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from controlplane.accounts.models import ApiToken
from controlplane.accounts.services import hash_secret
from controlplane.billing.models import ApiKey

pytestmark = pytest.mark.django_db


def setup() -> dict[str, str]:
    out = io.StringIO()
    call_command("run_demo", "--setup-only", "--operator", "admin", "--password", "pw", stdout=out)
    pairs = (line.partition(": ") for line in out.getvalue().splitlines() if ": " in line)
    return {key: value for key, _, value in pairs}


def test_setup_issues_a_tenant_key_and_site_bound_agent_tokens_and_revokes_old_ones() -> None:
    first = setup()
    second = setup()

    active_keys = ApiKey.objects.filter(tenant__slug="demo", revoked_at=None)
    assert [k.key_hash for k in active_keys] == [hash_secret(second["api key"])]
    assert ApiKey.objects.get(key_hash=hash_secret(first["api key"])).revoked_at is not None
    tokens = ApiToken.objects.filter(scope="agent", revoked_at=None).select_related("site")
    assert sorted((t.site.slug, t.key_hash) for t in tokens if t.site is not None) == sorted(
        [
            ("dc-a", hash_secret(second["agent token dc-a"])),
            ("dc-b", hash_secret(second["agent token dc-b"])),
        ]
    )
    assert ApiToken.objects.filter(scope="agent", revoked_at__isnull=False).count() == 2
