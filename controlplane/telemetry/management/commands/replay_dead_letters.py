"""``manage.py replay_dead_letters [--site SLUG] [--agent NAME]``: after a fix (a model added to
the inventory, a key restored, a bug fixed), send the pending dead letters through ingestion
again; idempotent by request id. Without options it lists the counts per agent first."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from controlplane.telemetry.dead_letters import dead_letter_counts
from controlplane.telemetry.replay import dead_letters_replay


class Command(BaseCommand):
    help = "Replay the records ingestion refused (all pending, or of one site or agent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--site", help="only this site's dead letters")
        parser.add_argument("--agent", help="only this agent's dead letters")

    def handle(self, *args: Any, site: str | None, agent: str | None, **options: Any) -> None:
        for count in dead_letter_counts():
            self.stdout.write(f"{count.site}/{count.agent or '?'}: {count.pending} pending of "
                              f"{count.total}")  # fmt: skip
        result = dead_letters_replay(site=site, agent=agent)
        self.stdout.write(f"accepted {result.accepted}, already stored {result.duplicates}, "
                          f"refused again {result.refused}")  # fmt: skip
