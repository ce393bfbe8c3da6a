"""Per-request records as the data-plane agents report them.

One row per request id, written once: agents retry batches, so ingestion is idempotent on the
unique ``request_id`` and a row is never updated afterwards. Rollups, SLA rules and alerts read
these rows in a later issue; billing gets its own ``UsageRecord`` from the same ingestion call.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q


class Pipeline(models.TextChoices):
    """The three routes of DOMAIN.md section 4."""

    P_MD = "P-MD", "Prefill -> Main-Decode"
    P_RLD_MD = "P-RLD-MD", "Prefill -> Relay-Decode -> Main-Decode"
    P_RLD = "P-RLD", "Prefill -> Relay-Decode (served in the prefill site)"


class HandoffMode(models.TextChoices):
    NONE = "", "No handoff"
    ONE_SHOT = "one-shot", "One-shot handoff"
    EXTEND_DECODE = "extend-decode", "Extend-decode handoff"


class RequestRecord(models.Model):
    """One served (or rejected) request: tokens, timings and where it ran.

    ``batch`` is the id of the ingestion call that inserted the row; it lets that call count
    exactly the rows it inserted when a concurrent call inserted some of the same request ids.
    """

    request_id = models.CharField(max_length=128, unique=True)
    tenant = models.CharField(max_length=64, help_text="tenant slug")
    api_key_prefix = models.CharField(max_length=16, blank=True)
    model = models.CharField(max_length=64, help_text="model profile slug")
    site = models.CharField(max_length=64, help_text="site slug where the request entered")
    pipeline = models.CharField(max_length=16, choices=Pipeline.choices)
    arrival_time = models.DateTimeField()
    finish_time = models.DateTimeField()
    input_tokens = models.PositiveIntegerField()
    hit_tokens = models.PositiveIntegerField()
    miss_tokens = models.PositiveIntegerField()
    output_tokens = models.PositiveIntegerField()
    ttft_s = models.FloatField(null=True, blank=True)
    tpot_s = models.FloatField(null=True, blank=True)
    wan_bytes = models.PositiveBigIntegerField(default=0)
    handoff_mode = models.CharField(
        max_length=16, choices=HandoffMode.choices, blank=True, default=""
    )
    rld_tokens = models.PositiveIntegerField(default=0)
    md_tokens = models.PositiveIntegerField(default=0)
    sla_met = models.BooleanField()
    rejected = models.BooleanField(default=False)
    batch = models.UUIDField(db_index=True, editable=False)
    source_token = models.ForeignKey(
        "accounts.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["tenant", "finish_time"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(input_tokens=F("hit_tokens") + F("miss_tokens")),
                name="requestrecord_input_is_hit_plus_miss",
            ),
            models.CheckConstraint(
                condition=Q(finish_time__gte=F("arrival_time")),
                name="requestrecord_finish_after_arrival",
            ),
        ]

    def __str__(self) -> str:
        return str(self.request_id)
