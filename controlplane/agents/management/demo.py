"""The database side of ``make demo``: migrate, seed, and the demo's secrets, stable across runs.

Secrets are stored hashed, so the demo keeps the ones it issued in ``$PDD_DATA_DIR/demo/
secrets.json`` (mode 0600, beside the SQLite file and the generated secret key) and reuses them
on the next start while the database still holds them, active: the printed API key, and so the
README's commands, keep working across restarts. A key or token that was revoked, or a database
that was replaced, gets a fresh one (the previous demo ones revoked). ``demo_reset`` empties the
database and forgets the file: the next start is a first start.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from controlplane.accounts.models import ApiToken
from controlplane.accounts.selectors import api_token_for_bearer
from controlplane.accounts.services import api_token_issue, api_token_revoke
from controlplane.billing.models import ApiKey
from controlplane.billing.services import api_key_create, api_key_revoke
from controlplane.core.services import model_update
from controlplane.inventory.models import Link, LinkKind, Site
from controlplane.tenancy.models import Tenant
from pdd_core.keys import hash_key

DEMO_SITES = ("dc-a", "dc-b")
DEMO_TENANT = "demo"
KEY_NAME = "demo gateway"


@dataclass
class DemoSecrets:
    """What the demo's processes need: the tenant's gateway key and one agent token per site."""

    api_key: str
    agent_tokens: dict[str, str] = field(default_factory=dict)
    reused: bool = False


def demo_dir() -> Path:
    return Path(settings.DATA_DIR) / "demo"


def secrets_path() -> Path:
    return demo_dir() / "secrets.json"


def _saved() -> dict[str, object]:
    try:
        raw = json.loads(secrets_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _save(demo: DemoSecrets) -> None:
    path = secrets_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"api_key": demo.api_key, "agent_tokens": demo.agent_tokens}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2)


def _live_api_key(tenant: Tenant, raw: object) -> bool:
    """Whether ``raw`` (``tk_<prefix>_<secret>``) is an active key of ``tenant``."""
    if not isinstance(raw, str) or raw.count("_") < 2:
        return False
    key = ApiKey.objects.filter(
        tenant=tenant, prefix=raw.split("_", 2)[1], revoked_at__isnull=True
    ).first()
    return key is not None and hmac.compare_digest(key.key_hash, hash_key(raw))


def _live_agent_token(site: Site, raw: object) -> bool:
    token = api_token_for_bearer(raw) if isinstance(raw, str) else None
    return token is not None and token.scope == "agent" and token.site_id == site.pk


def _api_key(tenant: Tenant, saved: object) -> tuple[str, bool]:
    if _live_api_key(tenant, saved):
        return str(saved), True
    for key in ApiKey.objects.filter(tenant=tenant, name__startswith=KEY_NAME, revoked_at=None):
        api_key_revoke(api_key=key)
    # Key names are unique per tenant, revoked ones included.
    name = f"{KEY_NAME} {secrets.token_hex(3)}"
    return api_key_create(tenant=tenant, name=name).secret, False


def _agent_token(site: Site, saved: object) -> tuple[str, bool]:
    if _live_agent_token(site, saved):
        return str(saved), True
    name = f"demo-agents-{site.slug}-"
    for token in ApiToken.objects.filter(name__startswith=name, revoked_at=None):
        api_token_revoke(token=token)
    name += secrets.token_hex(3)
    return api_token_issue(name=name, scope="agent", site=site).secret, False


def demo_wan_link(dataplane: Path) -> Link | None:
    """Register the WAN line the demo's emulator stands for; returns that link (None: none).

    The seeded topology describes a production line (``fixtures/demo/topology.json``); the
    demo's data plane emulates another (``wan`` in ``fixtures/dataplane/<engine>.json``): KV
    payloads travel at ``engine.payload_scale`` of their size over a line emulated at the same
    fraction of its bandwidth, so every transfer takes the time it would take at full size on
    ``bandwidth_gbps / payload_scale``. The journal counts WAN bytes at their real size
    (``pdd_core.agent.gateway.types.real_bytes``), so the link the topology page reads them
    against is that full-size line: its bandwidth, the emulator's round trip and jitter, no
    bandwidth jitter (the emulator has none).
    """
    raw = json.loads(dataplane.read_text(encoding="utf-8"))
    wan = raw["wan"]
    scale = float(raw.get("engine", {}).get("payload_scale", 1.0))
    sites = {a["site"] for a in raw["agents"]}
    link = (
        Link.objects.filter(kind=LinkKind.WAN, source__slug__in=sites, target__slug__in=sites)
        .order_by("slug")
        .first()
    )
    if link is None:
        return None
    return model_update(link, {
        "bandwidth_gbps": float(wan["bandwidth_gbps"]) / scale, "rtt_ms": float(wan["rtt_ms"]),
        "jitter_ms": float(wan.get("jitter_ms", 0.0)), "bandwidth_jitter": 0.0,
    })  # fmt: skip


def demo_setup(*, operator: str, password: str, dataplane: Path | None = None) -> DemoSecrets:
    """Migrate, seed, and the demo key and agent tokens: the saved ones while still active.

    With ``dataplane`` (the demo data plane's config) the WAN link is registered as that
    plane's emulator runs it (``demo_wan_link``)."""
    call_command("migrate", interactive=False, verbosity=0)
    call_command("seed_demo", operator=operator, password=password)
    if dataplane is not None:
        demo_wan_link(dataplane)
    saved = _saved()
    saved_tokens = saved.get("agent_tokens")
    tokens_in = saved_tokens if isinstance(saved_tokens, dict) else {}
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(slug=DEMO_TENANT, defaults={"name": "Demo tenant"})
        key, reused = _api_key(tenant, saved.get("api_key"))
        out = DemoSecrets(key, reused=reused)
        for slug in DEMO_SITES:
            try:
                site = Site.objects.get(slug=slug)
            except Site.DoesNotExist:
                raise CommandError(f"run_demo: the demo topology has no site {slug!r}") from None
            out.agent_tokens[slug], token_reused = _agent_token(site, tokens_in.get(slug))
            out.reused = out.reused and token_reused
    _save(out)
    return out


def demo_reset() -> None:
    """Empty the database (schema kept) and forget the demo's secrets and data-plane state."""
    call_command("migrate", interactive=False, verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    with contextlib.suppress(FileNotFoundError):
        secrets_path().unlink()
    shutil.rmtree(demo_dir() / "dataplane", ignore_errors=True)
