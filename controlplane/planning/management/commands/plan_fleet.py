"""``manage.py plan_fleet FLEET [--json] [--out DIR]``: a fleet plan with its phases fanned
out as Celery groups (``controlplane.planning.fleet``): over the workers on Redis, in this
process on the embedded defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.planning.fleet import celery_map
from pdd_core.fleet import load_fleet, plan_fleet
from pdd_core.fleet.report import render_fleet


class Command(BaseCommand):
    help = "Plan a fleet file (sites, inventory, models, tenants) with its work on Celery."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("fleet", help="fleet file (TOML with a [fleet] table)")
        parser.add_argument("--json", action="store_true", help="print the plan as JSON")
        parser.add_argument("--out", default=None, help="also write DIR/plan.json")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            load_fleet(options["fleet"])
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        payload = plan_fleet(options["fleet"], celery_map)
        if options["out"]:
            out = Path(options["out"])
            out.mkdir(parents=True, exist_ok=True)
            (out / "plan.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        self.stdout.write(
            json.dumps(payload, indent=2) if options["json"] else render_fleet(payload)
        )
