"""``manage.py create_token --name N --scope S [--tenant T] [--site S] [--expires-at ISO]``:
the secret on stdout."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from controlplane.accounts.models import ApiToken, Scope
from controlplane.accounts.services import api_token_issue


class Command(BaseCommand):
    help = "Create an API token and print it once (it is stored hashed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="unique name, e.g. billing-system")
        parser.add_argument("--scope", required=True, choices=Scope.values)
        parser.add_argument(
            "--tenant", default=None, help="tenant slug; binds a billing token to that tenant"
        )
        parser.add_argument(
            "--site", default=None, help="site slug; binds an agent token to that site"
        )
        parser.add_argument(
            "--expires-at", default=None, help="ISO date-time after which the token is refused"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if ApiToken.objects.filter(name=options["name"]).exists():
            raise CommandError(f"a token named {options['name']!r} already exists")
        tenant = None
        if options["tenant"]:
            from controlplane.tenancy.models import Tenant

            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"no tenant {options['tenant']!r}")
        site = None
        if options["site"]:
            from controlplane.inventory.models import Site

            site = Site.objects.filter(slug=options["site"]).first()
            if site is None:
                raise CommandError(f"no site {options['site']!r}")
        expires_at = None
        if options["expires_at"]:
            expires_at = parse_datetime(options["expires_at"])
            if expires_at is None or expires_at.tzinfo is None:
                raise CommandError("--expires-at: an ISO date-time with an offset, e.g. ...Z")
        try:
            issued = api_token_issue(
                name=options["name"], scope=options["scope"], tenant=tenant, site=site,
                expires_at=expires_at,
            )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"Created {issued.token.scope} token {issued.token.name!r}; "
            "it is shown once, store it now:"
        )
        self.stdout.write(issued.secret)
