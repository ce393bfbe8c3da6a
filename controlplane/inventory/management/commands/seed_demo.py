"""``python manage.py seed_demo``: the chip and model catalogs, the demo topology and showcase.

Loads ``fixtures/catalog/*.json`` through ``pdd_core.specs`` (the files the simulator reads) and
``fixtures/demo/topology.json``, then what makes the demo's pages speak: SLA rules (``DEMO_RULES``)
and a price book for the demo model, at the reference scenario's prices
(``fixtures/scenarios/pdd_reference.toml`` ``[prices]``), so that alerts, revenue and the demo
tenant's invoice have something to show. Idempotent: running it twice changes nothing the second
time, and rules or price books an operator changed are left alone. With ``--operator USER`` it
also makes sure a browser login with operator rights exists.
"""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.billing.models import PriceBook
from controlplane.billing.services import price_book_create
from controlplane.inventory.models import ModelProfile
from controlplane.inventory.services import catalog_seed, topology_seed
from controlplane.telemetry.models import AlertMetric, SlaRule
from pdd_core.specs import CATALOG_DIR

DEMO_TOPOLOGY = CATALOG_DIR.parent / "demo" / "topology.json"
PRICES = CATALOG_DIR.parent / "scenarios" / "pdd_reference.toml"
PRICES_FROM = datetime(2025, 1, 1, tzinfo=UTC)

DATAPLANE = CATALOG_DIR.parent / "dataplane" / "timed.json"

# (slug, name, metric, key of the demo data plane's "sla" in fixtures/dataplane/timed.json): the
# rules check the SLA the demo data plane is configured for, on one-minute windows.
DEMO_RULES = (
    ("demo-ttft-p90", "TTFT P90 per minute", AlertMetric.TTFT_P90, "ttft_p90_s"),
    ("demo-ttft-p99", "TTFT P99 per minute", AlertMetric.TTFT_P99, "ttft_p99_s"),
    ("demo-tpot-p90", "TPOT P90 per minute", AlertMetric.TPOT_P90, "tpot_p90_s"),
    ("demo-tpot-p99", "TPOT P99 per minute", AlertMetric.TPOT_P99, "tpot_p99_s"),
)


def showcase_seed() -> tuple[int, int]:
    """SLA rules and price books the demo needs, where missing; returns (rules, books) made."""
    sla = json.loads(DATAPLANE.read_text(encoding="utf-8"))["sla"]
    rules = 0
    for slug, name, metric, key in DEMO_RULES:
        _, created = SlaRule.objects.get_or_create(
            slug=slug, defaults={"name": name, "metric": metric, "threshold": float(sla[key]),
                                 "window_s": 60},
        )  # fmt: skip
        rules += created
    _, created = SlaRule.objects.get_or_create(
        slug="demo-dead-letters", defaults={"name": "Records refused per minute",
                                            "metric": AlertMetric.DEAD_LETTERS, "threshold": 0.0,
                                            "window_s": 60},
    )  # fmt: skip
    rules += created
    prices = tomllib.loads(PRICES.read_text(encoding="utf-8"))["prices"]
    books = 0
    for model in ModelProfile.objects.filter(pools__isnull=False).distinct():
        if PriceBook.objects.filter(model=model, currency="USD").exists():
            continue
        price_book_create({
            "model": model, "currency": "USD", "effective_from": PRICES_FROM,
            **{k: Decimal(str(prices[k])) for k in
               ("miss_input_per_mtok", "hit_input_per_mtok", "output_per_mtok")},
        })  # fmt: skip
        books += 1
    return rules, books


class Command(BaseCommand):
    help = "Load the chip/model catalogs and the demo topology (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--topology", type=Path, default=DEMO_TOPOLOGY)
        parser.add_argument("--operator", help="username of a demo operator login to ensure")
        parser.add_argument("--password", help="password for --operator (required with it)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            chips, models = catalog_seed()
            raw = json.loads(Path(options["topology"]).read_text(encoding="utf-8"))
            sites, links, pools = topology_seed(raw=raw)
            rules, books = showcase_seed()
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"seed_demo: {exc}") from exc
        self.stdout.write(
            f"Seeded {chips} chips, {models} models, {sites} sites, {links} links, {pools} pools; "
            f"{rules} new SLA rules, {books} new price books."
        )
        if options["operator"]:
            if not options["password"]:
                raise CommandError("--password is required with --operator")
            user_model = get_user_model()
            user, created = user_model.objects.get_or_create(username=options["operator"])
            user.is_staff = True
            user.is_superuser = True
            if created:
                user.set_password(options["password"])
            user.save()
            state = "created" if created else "exists (password unchanged)"
            self.stdout.write(f"Operator login {user.get_username()!r} {state}.")
