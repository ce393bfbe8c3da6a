"""``manage.py render_site SITE``: print the site's Kubernetes workloads (YAML) rendered from its
desired state (``controlplane/agents/kube.py``), for a site another team runs; ``--apply``
applies them from inside the cluster with the pod's service account."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.agents import kube
from controlplane.inventory.models import Site


class Command(BaseCommand):
    help = "Print (or --apply in the cluster) a site's workloads from its desired state."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("site", help="site slug")
        parser.add_argument("--namespace", default=kube.RenderSettings.namespace)
        parser.add_argument("--image", default=kube.RenderSettings.image)
        parser.add_argument(
            "--models-claim",
            default=kube.RenderSettings.models_claim,
            help="PersistentVolumeClaim of the model checkpoints (vLLM)",
        )
        parser.add_argument(
            "--apply",
            action="store_true",
            help="apply in the cluster (server-side apply or a scale patch)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        site = Site.objects.filter(slug=options["site"]).first()
        if site is None:
            known = ", ".join(Site.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"No site {options['site']!r} (sites: {known}).")
        settings = kube.RenderSettings(
            namespace=options["namespace"],
            image=options["image"],
            models_claim=options["models_claim"],
        )
        try:
            if options["apply"]:
                for call in kube.apply_site(site, settings):
                    self.stdout.write(f"{call.verb} statefulset/{call.name}")
                return
            objects = kube.render_site(site, settings)
        except kube.RenderError as exc:
            raise CommandError(str(exc)) from None
        if not objects:
            self.stderr.write(f"{site.slug}: no plan is active; nothing to render.")
            return
        self.stdout.write(kube.render_yaml(objects), ending="")
