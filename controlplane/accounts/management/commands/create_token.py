"""``python manage.py create_token --name NAME --scope SCOPE``: the secret on stdout's last line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.accounts.models import ApiToken, Scope
from controlplane.accounts.services import api_token_issue


class Command(BaseCommand):
    help = "Create an API token and print it once (it is stored hashed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="unique name, e.g. billing-system")
        parser.add_argument("--scope", required=True, choices=Scope.values)

    def handle(self, *args: Any, **options: Any) -> None:
        if ApiToken.objects.filter(name=options["name"]).exists():
            raise CommandError(f"a token named {options['name']!r} already exists")
        try:
            issued = api_token_issue(name=options["name"], scope=options["scope"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"Created {issued.token.scope} token {issued.token.name!r}; "
            "it is shown once, store it now:"
        )
        self.stdout.write(issued.secret)
