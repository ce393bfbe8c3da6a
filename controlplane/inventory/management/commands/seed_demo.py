"""``python manage.py seed_demo``: the chip and model catalogs plus the demo topology.

Loads ``fixtures/catalog/*.json`` through ``pdd_core.specs`` (the files the simulator reads) and
``fixtures/demo/topology.json``. Idempotent: running it twice changes nothing the second time.
With ``--operator USER`` it also makes sure a browser login with operator rights exists.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.inventory.services import catalog_seed, topology_seed
from pdd_core.specs import CATALOG_DIR

DEMO_TOPOLOGY = CATALOG_DIR.parent / "demo" / "topology.json"


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
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"seed_demo: {exc}") from exc
        self.stdout.write(
            f"Seeded {chips} chips, {models} models, {sites} sites, {links} links, {pools} pools."
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
