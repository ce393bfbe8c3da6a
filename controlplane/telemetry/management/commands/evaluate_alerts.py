"""``manage.py evaluate_alerts [--every SECONDS]``: the beat job by hand.

On the embedded defaults there is no beat process; run this beside ``make demo`` (with
``--every 5``) to have SLA rules evaluated while records arrive.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from controlplane.telemetry.alerts import alerts_evaluate


class Command(BaseCommand):
    help = "Evaluate the SLA rules on the last closed windows (once, or every N seconds)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--every", type=float, default=0.0, help="repeat every N seconds")

    def handle(self, *args: Any, every: float, **options: Any) -> None:
        try:
            while True:
                result = alerts_evaluate()
                self.stdout.write(
                    f"opened {result.opened}, updated {result.updated}, resolved {result.resolved}"
                )
                if every <= 0:
                    return
                time.sleep(every)
        except KeyboardInterrupt:  # Ctrl-C (or the demo stopping) ends the loop quietly
            return
