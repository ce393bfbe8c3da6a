"""Abstract models that several apps' tables share (no table of their own)."""

from __future__ import annotations

from django.db import models

from controlplane.core.choices import Pipeline


class RequestColumns(models.Model):
    """The columns of one request that telemetry's ``RequestRecord`` and billing's
    ``UsageRecord`` both keep: its id within its entry site, the model and pipeline that served
    it, its tokens as they are priced (miss, hit, output), and whether it met its SLA.

    One ingestion call writes both rows from one agent record, so the columns are declared here
    once and cannot drift apart (a usage row is the record's billable part).
    """

    request_id = models.CharField(max_length=128, help_text="unique within its site")
    model = models.CharField(max_length=64, help_text="model profile slug")
    site = models.CharField(max_length=64, help_text="site slug where the request entered")
    pipeline = models.CharField(max_length=16, choices=Pipeline.choices)
    miss_tokens = models.PositiveIntegerField()
    hit_tokens = models.PositiveIntegerField()
    output_tokens = models.PositiveIntegerField()
    sla_met = models.BooleanField()
    # The config version whose routing table routed the request (the gateway stamps it; null
    # when it ran on its file's table alone): usage and invoices group by it, so billing sees
    # what activating a plan changed per token.
    config_version = models.PositiveIntegerField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["id"]  # insertion order

    def __str__(self) -> str:
        return str(self.request_id)
