"""Per-request records as the data-plane agents report them.

One row per request id and entry site, written once: agents retry batches, so ingestion is
idempotent on ``(site, request_id)`` and a row is never updated afterwards (a different record
under a known id is refused as a conflict). The uniqueness lives in ``RequestKey``, a small
unpartitioned table, because on PostgreSQL ``RequestRecord`` is partitioned by day of
``finish_time`` (``telemetry.partitions``) and a unique constraint of a partitioned table must
include the partition key. Rollups, SLA rules and alerts are derived from these rows; billing
gets its own ``UsageRecord`` from the same ingestion call.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from controlplane.core.choices import HandoffMode
from controlplane.core.models import RequestColumns


class RequestKey(models.Model):
    """The identity of a stored record: ingestion inserts the key first (``ON CONFLICT DO
    NOTHING``) and writes the record only when the key is new, so a retried or concurrent
    duplicate is refused by this table's unique index. Pruned with its record."""

    site = models.CharField(max_length=64)
    request_id = models.CharField(max_length=128)
    finish_time = models.DateTimeField(help_text="the record's, to prune keys with records")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["site", "request_id"], name="requestkey_unique"),
        ]
        indexes = [models.Index(fields=["finish_time"], name="requestkey_finish")]

    def __str__(self) -> str:
        return f"{self.site}/{self.request_id}"


class RequestRecord(RequestColumns):
    """One served (or rejected) request: tokens, timings and where it ran.

    ``batch`` is the id of the ingestion call that inserted the row. On PostgreSQL the table is
    partitioned by day of ``finish_time`` and its primary key is ``(id, finish_time)``.
    """

    tenant = models.CharField(max_length=64, help_text="tenant slug")
    api_key_prefix = models.CharField(max_length=16, blank=True)
    arrival_time = models.DateTimeField()
    finish_time = models.DateTimeField()
    input_tokens = models.PositiveIntegerField()
    ttft_s = models.FloatField(null=True, blank=True)
    tpot_s = models.FloatField(null=True, blank=True)
    wan_bytes = models.PositiveBigIntegerField(default=0)
    handoff_mode = models.CharField(
        max_length=16, choices=HandoffMode.choices, blank=True, default=""
    )
    rld_tokens = models.PositiveIntegerField(default=0)
    md_tokens = models.PositiveIntegerField(default=0)
    rejected = models.BooleanField(default=False)
    batch = models.UUIDField(editable=False)
    # Which agent token reported the row. No database constraint: PostgreSQL would check it
    # with a trigger query per inserted row (a fifth of the backend's CPU per record). The
    # token is the caller's own, authenticated in the same request, and Django still nulls
    # the column when a token is deleted (``on_delete``; the index serves that update).
    source_token = models.ForeignKey(
        "accounts.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        db_constraint=False,
    )  # fmt: skip

    class Meta(RequestColumns.Meta):
        # Each index costs every ingested row an insert: only what a query needs, in one
        # index. Pruning reads ``finish_time`` (its lead); the conflict check of a repeated id
        # reads ``(finish_time, site, request_id)`` with the time from ``RequestKey``, which
        # also confines it to the record's day partition. Nothing reads records by tenant
        # (pages read the rollups, billing its usage rows).
        indexes = [
            models.Index(
                fields=["finish_time", "site", "request_id"], name="requestrecord_finish_key"
            ),
        ]
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


def _empty_map() -> dict[str, int]:
    return {}


# The three kinds of rollup column, as ``rollups`` merges them: counts (``COUNT_FIELDS``), float
# sums (``SUM_FIELDS``) and sparse maps of counts (``MAP_FIELDS``); each starts empty. ``rollups``
# reads the kinds from these field classes: declare every rollup column with one of them.
def _count(help_text: str = "") -> models.BigIntegerField:  # type: ignore[type-arg]
    return models.BigIntegerField(default=0, help_text=help_text)


def _sum(help_text: str = "") -> models.FloatField:  # type: ignore[type-arg]
    return models.FloatField(default=0.0, help_text=help_text)


def _counts_by(help_text: str = "") -> models.JSONField:
    return models.JSONField(default=_empty_map, help_text=help_text)


class RollupScope(models.TextChoices):
    """What a rollup row aggregates over. ``pool`` is the pipeline (records name no pool: the
    pipeline says which roles' pools served the request); ``site-pipeline`` exists for the
    cumulative Prometheus counters only; ``model`` and ``tenant-model`` serve SLA rules."""

    ALL = "all", "Everything"
    SITE = "site", "Entry site"
    POOL = "pool", "Pipeline (the pools it runs on)"
    TENANT = "tenant", "Tenant"
    MODEL = "model", "Model"
    TENANT_MODEL = "tenant-model", "Tenant and model"
    SITE_PIPELINE = "site-pipeline", "Site and pipeline (cumulative counters)"


class TelemetryRollup(models.Model):
    """Additive aggregates of the records that finished in one window of one scope.

    Every field is a sum (or a sparse map of counts), so rows are updated incrementally at
    ingestion and any set of rows can be merged; percentiles come from the histograms of
    ``telemetry.sketch``. ``window_s`` is 5 or 60 for the live windows, 0 for the cumulative
    all-time row behind ``/metrics`` (its ``start`` is the epoch; it is never pruned).
    """

    window_s = models.PositiveIntegerField()
    scope = models.CharField(max_length=16, choices=RollupScope.choices)
    key = models.CharField(max_length=140, blank=True, default="")
    start = models.DateTimeField()
    requests = _count("all records, rejected included")
    rejected = _count()
    sla_met = _count("served requests that met the SLA")
    input_tokens = _count()
    hit_tokens = _count()
    output_tokens = _count()
    wan_bytes = _count()
    rld_tokens = _count()
    md_tokens = _count()
    hit_ratio_sum = _sum("sum of per-request hit ratios")
    ttft_count = _count()
    ttft_sum = _sum()
    tpot_count = _count()
    tpot_sum = _sum()
    revenue = _sum("price-book revenue of served requests")
    hit_bands = _counts_by("band index -> requests")
    ttft_hist = _counts_by()
    tpot_hist = _counts_by()
    pipelines = _counts_by("pipeline -> requests")
    handoffs = _counts_by("handoff mode -> requests")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["window_s", "scope", "key", "start"]
        constraints = [
            models.UniqueConstraint(
                fields=["window_s", "scope", "key", "start"], name="rollup_unique_window"
            ),
            models.CheckConstraint(
                condition=Q(scope__in=[s.value for s in RollupScope]), name="rollup_scope_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["window_s", "scope", "key", "-start"], name="rollup_series"),
            models.Index(fields=["start"], name="rollup_start"),
        ]

    def __str__(self) -> str:
        return f"{self.window_s}s {self.scope}:{self.key} @ {self.start:%H:%M:%S}"


class RollupPending(models.Model):
    """Rollup deltas that ingestion committed and no flush has added to ``TelemetryRollup`` yet.

    Written in the ingestion transaction (one row per call: its records summed per finest cell,
    ``rollups.cells_dump``), so a delta exists exactly when its records do; deleted by the flush
    in the transaction that adds it to the rollups, so it is added exactly once
    (``telemetry.staging``). Insert-only for ingestion: concurrent batches lock nothing shared.
    """

    cells = models.JSONField(help_text="rollups.cells_dump of the call's new records")
    records = models.PositiveIntegerField(help_text="how many records the cells count")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.records} records @ {self.created_at:%H:%M:%S}"


class AlertMetric(models.TextChoices):
    TTFT_P90 = "ttft_p90", "TTFT P90 (s) above"
    TTFT_P99 = "ttft_p99", "TTFT P99 (s) above"
    TPOT_P90 = "tpot_p90", "TPOT P90 (s) above"
    TPOT_P99 = "tpot_p99", "TPOT P99 (s) above"
    GOODPUT = "goodput_rps", "Goodput (req/s) below"
    DEAD_LETTERS = "dead_letters", "Records refused by ingestion (dead letters) above"


class SlaRule(models.Model):
    """An SLA target for a model and/or tenant (blank: all), checked on each closed window.

    Latency metrics breach when the window's value is above ``threshold``; goodput breaches when
    it is below (a floor). A window without served requests is not evaluated, except for dead
    letters: the records refused in the window (0 resolves the alert), served or not.
    """

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=100)
    model = models.CharField(max_length=64, blank=True, help_text="model slug; blank: all")
    tenant = models.CharField(max_length=64, blank=True, help_text="tenant slug; blank: all")
    metric = models.CharField(max_length=16, choices=AlertMetric.choices)
    threshold = models.FloatField()
    window_s = models.PositiveIntegerField(default=60, choices=[(5, "5 s"), (60, "1 min")])
    enabled = models.BooleanField(default=True)
    webhook_url = models.URLField(blank=True, help_text="POSTed on open and resolve, signed")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(threshold__gte=0), name="slarule_threshold_gte_0"),
            models.CheckConstraint(
                condition=Q(metric__in=[m.value for m in AlertMetric]), name="slarule_metric_valid"
            ),
            models.CheckConstraint(condition=Q(window_s__in=[5, 60]), name="slarule_window"),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_floor(self) -> bool:
        return self.metric == AlertMetric.GOODPUT


class AlertState(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"


class Alert(models.Model):
    """One breach of a rule, from the first window that broke it to the first that did not.

    ``value`` is the latest evaluated value, ``worst`` the worst seen while open.
    """

    rule = models.ForeignKey(SlaRule, on_delete=models.CASCADE, related_name="alerts")
    state = models.CharField(max_length=8, choices=AlertState.choices, default=AlertState.OPEN)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    value = models.FloatField()
    worst = models.FloatField()
    threshold = models.FloatField(help_text="the rule's threshold when the alert opened")

    class Meta:
        ordering = ["-first_seen", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule"], condition=Q(state="open"), name="alert_one_open_per_rule"
            ),
            models.CheckConstraint(
                condition=Q(last_seen__gte=F("first_seen")), name="alert_last_after_first"
            ),
        ]
        indexes = [models.Index(fields=["state", "-first_seen"], name="alert_state_time")]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.state} since {self.first_seen:%Y-%m-%d %H:%M:%S}"


class DeadLetter(models.Model):
    """A reported record that ingestion refused, kept so that an operator can see it, fix its
    cause (a missing model, a key, a bug) and replay it (``telemetry.dead_letters``).

    The control plane refuses each bad record itself, so it keeps every one of them as it
    arrived (``record``, JSON text, ASCII-escaped so any text is storable) with its errors, the
    agent that wrote it and the token that reported it: the agents' own
    ``<agent>.dead.jsonl`` files are a local copy. ``key`` identifies a record within its site
    (its ``request_id``, else a hash of the record), so a record refused again updates its row.
    ``replayed_at`` is set once a replay had it accepted (or found it already stored).
    """

    site = models.CharField(max_length=64, blank=True)
    key = models.CharField(
        max_length=140, help_text="the request id, or sha256:<hex> of the record"
    )
    agent = models.CharField(max_length=100, blank=True, help_text="the agent that wrote it")
    tenant = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=64, blank=True)
    record = models.TextField(help_text="the record as reported, as JSON")
    errors = models.TextField(help_text="ingestion's field errors, as JSON")
    source_token = models.ForeignKey(
        "accounts.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    replayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen", "id"]
        constraints = [
            models.UniqueConstraint(fields=["site", "key"], name="deadletter_unique_key"),
        ]
        indexes = [
            models.Index(fields=["replayed_at", "site", "agent"], name="deadletter_pending"),
            models.Index(fields=["last_seen"], name="deadletter_last_seen"),
        ]

    def __str__(self) -> str:
        return f"{self.site}/{self.key}"
