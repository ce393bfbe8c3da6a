"""Inventory: where the compute is and what it runs.

Sites (datacenters), chip models, links inside and between sites, served model profiles and the
instance pools that put a role (P, RLD, MD) of a model on chips in a site. Physical validation
lives once, in ``pdd_core.specs``: each model's ``clean`` builds its spec and reports the spec's
error against the field it names; the database constraints back up the simplest invariants.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

from pdd_core import specs

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Spec = TypeVar("Spec")

# Spec field names that differ from this module's column names.
_SPEC_FIELD_TO_COLUMN = {
    "price_per_hour": "price_per_hour",
    "source_site": "source",
    "target_site": "target",
    "id": "slug",
    "instances": "instance_count",
}


def _clean_spec(build: Any) -> Any:
    """Build a pdd_core spec; a SpecError becomes a ValidationError on the named field."""
    try:
        return build()
    except specs.SpecError as exc:
        raise ValidationError(
            {_SPEC_FIELD_TO_COLUMN.get(exc.field, exc.field): exc.message}
        ) from None


def _spec_from_columns(spec_cls: Callable[..., Spec], row: models.Model, **given: Any) -> Spec:
    """Build ``spec_cls`` for ``row``: ``given`` are the fields named or typed otherwise here (the
    spec's ``id`` is the slug, not the primary key); every other spec field is the column of the
    same name."""
    columns = {column.name for column in row._meta.concrete_fields} - {"id"}
    same = {
        name: getattr(row, name)
        for name in (f.name for f in dataclasses.fields(cast("type[DataclassInstance]", spec_cls)))
        if name in columns and name not in given
    }
    return spec_cls(**same, **given)


# Stable kebab-case ids; dots are allowed because model versions have them (llama-3.1-70b).
identifier_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$",
    "Use lowercase letters, digits, hyphens and dots, starting and ending with a letter or digit.",
)


def identifier_field(help_text: str = "") -> models.CharField:  # type: ignore[type-arg]
    return models.CharField(
        max_length=64, unique=True, validators=[identifier_validator], help_text=help_text
    )


class CatalogEntry(models.Model):
    """What sites, chips, models and tenants share: a stable slug that machines name it by, a
    unique name that people read (its ``str``), and lists ordered by slug. ``BriefRelatedField``
    shows an entry by these three (id, slug, name)."""

    slug = identifier_field()
    name = models.CharField(max_length=100, unique=True)

    class Meta:
        abstract = True
        ordering = ["slug"]

    def __str__(self) -> str:
        return str(self.name)


class SourcedCatalogEntry(CatalogEntry):
    """A catalog entry made of published figures (chips, models): where the figures come from,
    free notes, and whether any of them is an estimate rather than a published value."""

    source = models.TextField(help_text="where the figures come from")
    notes = models.TextField(blank=True)
    is_estimate = models.BooleanField(default=False)

    class Meta(CatalogEntry.Meta):
        abstract = True


def positive(field: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=Q(**{f"{field}__gt": 0}), name=f"%(class)s_{field}_positive"
    )


def non_negative(field: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=Q(**{f"{field}__gte": 0}), name=f"%(class)s_{field}_non_negative"
    )


class Site(CatalogEntry):
    """A datacenter ("site"): the unit of RDMA reach. Pools live in sites; WAN links join them."""

    region = models.CharField(max_length=64, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def to_spec(self) -> specs.SiteSpec:
        return specs.SiteSpec(id=self.slug, name=self.name, region=self.region)


class ChipModel(SourcedCatalogEntry):
    """An accelerator type on the four axes of DOMAIN.md section 1, with its price and source."""

    slug = identifier_field("catalog id, e.g. h100-sxm")
    vendor = models.CharField(max_length=64, blank=True)
    bf16_tflops = models.FloatField(help_text="dense BF16 TFLOP/s")
    fp8_tflops = models.FloatField(null=True, blank=True, help_text="dense FP8 TFLOP/s")
    hbm_gib = models.FloatField(help_text="HBM capacity, GiB")
    hbm_tbps = models.FloatField(help_text="HBM bandwidth, TB/s")
    scaleup_gbytes_per_s = models.FloatField(help_text="scale-up interconnect, GB/s")
    scaleout_gbits_per_s = models.FloatField(help_text="scale-out NIC, Gbit/s")
    scaleup_domain = models.PositiveIntegerField(
        default=8, help_text="chips sharing one scale-up fabric (NVLink/UB domain)"
    )
    chips_per_node = models.PositiveIntegerField(default=8, help_text="chips per server")
    compute_efficiency = models.FloatField(default=0.55)
    memory_efficiency = models.FloatField(default=0.75)
    price_per_hour = models.DecimalField(
        max_digits=12, decimal_places=4, validators=[MinValueValidator(Decimal(0))]
    )

    class Meta(SourcedCatalogEntry.Meta):
        constraints = [
            positive("bf16_tflops"),
            positive("hbm_gib"),
            positive("hbm_tbps"),
            positive("scaleup_gbytes_per_s"),
            positive("scaleout_gbits_per_s"),
            non_negative("price_per_hour"),
            models.CheckConstraint(
                condition=Q(compute_efficiency__gt=0, compute_efficiency__lte=1)
                & Q(memory_efficiency__gt=0, memory_efficiency__lte=1),
                name="chipmodel_efficiencies_fraction",
            ),
        ]

    def to_spec(self) -> specs.ChipSpec:
        return _spec_from_columns(
            specs.ChipSpec, self, id=self.slug, price_per_hour=float(self.price_per_hour)
        )

    def clean(self) -> None:
        _clean_spec(self.to_spec)


class LinkKind(models.TextChoices):
    """``pdd_core.specs.LinkKind``, with labels."""

    RDMA = specs.LinkKind.RDMA.value, "RDMA (inside a site)"
    WAN = specs.LinkKind.WAN.value, "WAN (Ethernet/TCP between sites)"


class Link(models.Model):
    """A network path: a site's internal RDMA fabric, or a WAN line between two sites."""

    slug = identifier_field()
    kind = models.CharField(max_length=8, choices=LinkKind.choices)
    source = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="links_out")
    target = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="links_in")
    bandwidth_gbps = models.FloatField()
    rtt_ms = models.FloatField()
    jitter_ms = models.FloatField(default=0.0, help_text="std dev of extra one-way delay, ms")
    bandwidth_jitter = models.FloatField(
        default=0.0, help_text="coefficient of variation of a transfer's bandwidth, in [0, 1)"
    )
    cost_per_gb = models.DecimalField(
        max_digits=10,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
    )

    class Meta:
        ordering = ["slug"]
        constraints = [
            positive("bandwidth_gbps"),
            non_negative("rtt_ms"),
            non_negative("jitter_ms"),
            models.CheckConstraint(
                condition=Q(bandwidth_jitter__gte=0, bandwidth_jitter__lt=1),
                name="link_bandwidth_jitter_range",
            ),
            models.CheckConstraint(
                condition=(Q(kind=LinkKind.WAN) & ~Q(source=F("target")))
                | (Q(kind=LinkKind.RDMA) & Q(source=F("target"))),
                name="link_wan_joins_two_sites_rdma_one",
            ),
        ]

    def __str__(self) -> str:
        return str(self.slug)

    def to_spec(self) -> specs.LinkSpec:
        return specs.LinkSpec(
            id=self.slug,
            kind=specs.LinkKind(self.kind),
            source_site=self.source.slug if self.source_id else "",
            target_site=self.target.slug if self.target_id else "",
            bandwidth_gbps=self.bandwidth_gbps,
            rtt_ms=self.rtt_ms,
            jitter_ms=self.jitter_ms,
            bandwidth_jitter=self.bandwidth_jitter,
            cost_per_gb=float(self.cost_per_gb or 0),
        )

    def clean(self) -> None:
        if self.kind == LinkKind.WAN and self.source_id and self.source_id == self.target_id:
            raise ValidationError({"target": "A WAN link joins two different sites."})
        if self.kind == LinkKind.RDMA and self.source_id != self.target_id:
            raise ValidationError({"target": "An RDMA link is one site's internal fabric."})
        if self.source_id and self.target_id:
            _clean_spec(self.to_spec)


class AttentionKind(models.TextChoices):
    """``pdd_core.specs.Attention``, with labels."""

    MHA = specs.Attention.MHA.value, "Multi-head"
    GQA = specs.Attention.GQA.value, "Grouped-query"
    MLA = specs.Attention.MLA.value, "Multi-head latent"


class ModelProfile(SourcedCatalogEntry):
    """A served LLM, from its published config. KV bytes per token is derived, never typed."""

    slug = identifier_field("catalog id, e.g. deepseek-v3")
    total_params_b = models.FloatField()
    active_params_b = models.FloatField()
    layers = models.PositiveIntegerField()
    hidden_size = models.PositiveIntegerField()
    attention = models.CharField(max_length=4, choices=AttentionKind.choices)
    attention_heads = models.PositiveIntegerField()
    kv_heads = models.PositiveIntegerField()
    head_dim = models.PositiveIntegerField()
    kv_lora_rank = models.PositiveIntegerField(default=0)
    rope_dim = models.PositiveIntegerField(default=0)
    kv_bytes_per_elem = models.FloatField(default=2.0)
    weight_bytes_per_param = models.FloatField(default=2.0)
    moe_experts = models.PositiveIntegerField(default=0)
    moe_top_k = models.PositiveIntegerField(default=0)
    moe_shared_experts = models.PositiveIntegerField(default=0)
    max_context = models.PositiveIntegerField(default=131072)

    class Meta(SourcedCatalogEntry.Meta):
        constraints = [
            positive("total_params_b"),
            positive("active_params_b"),
            positive("layers"),
            positive("kv_bytes_per_elem"),
            positive("weight_bytes_per_param"),
            models.CheckConstraint(
                condition=Q(active_params_b__lte=F("total_params_b")),
                name="modelprofile_active_le_total",
            ),
        ]

    def to_spec(self) -> specs.ModelSpec:
        return _spec_from_columns(
            specs.ModelSpec,
            self,
            id=self.slug,
            attention=specs.Attention(self.attention),
            estimate=self.is_estimate,
        )

    @property
    def kv_bytes_per_token(self) -> float:
        return self.to_spec().kv_bytes_per_token

    def clean(self) -> None:
        if self.attention not in AttentionKind.values:
            return  # the field's own choices validation reports it
        _clean_spec(self.to_spec)


class Role(models.TextChoices):
    """``pdd_core.specs.Role``, with labels."""

    PREFILL = specs.Role.PREFILL.value, "Prefill"
    RELAY_DECODE = specs.Role.RELAY_DECODE.value, "Relay decode"
    MAIN_DECODE = specs.Role.MAIN_DECODE.value, "Main decode"


class InstancePool(models.Model):
    """Identical instances of one role of one model on one chip type in one site."""

    slug = identifier_field()
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="pools")
    chip = models.ForeignKey(ChipModel, on_delete=models.PROTECT, related_name="pools")
    model = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="pools")
    role = models.CharField(max_length=3, choices=Role.choices)
    chips_per_instance = models.PositiveIntegerField(
        default=1, help_text="tensor parallel degree (tp): chips of one pipeline stage's replica"
    )
    pp = models.PositiveIntegerField(default=1, help_text="pipeline parallel degree")
    dp = models.PositiveIntegerField(default=1, help_text="attention data parallel degree")
    ep = models.PositiveIntegerField(default=1, help_text="expert parallel degree (1 or tp x dp)")
    instance_count = models.PositiveIntegerField(default=1, help_text="0 for a drained pool")

    class Meta:
        ordering = ["site__slug", "role", "slug"]
        constraints = [
            positive("chips_per_instance"),
            positive("pp"),
            positive("dp"),
            positive("ep"),
            non_negative("instance_count"),
            models.UniqueConstraint(
                fields=["site", "chip", "model", "role", "chips_per_instance", "pp", "dp", "ep"],
                name="instancepool_unique_shape",
                violation_error_message="A pool of this role, chip, model and size already "
                "exists in this site; change its instance count instead.",
            ),
        ]

    def __str__(self) -> str:
        return str(self.slug)

    @property
    def chip_count(self) -> int:
        return self.chips_per_instance * self.pp * self.dp * self.instance_count

    def to_spec(self) -> specs.PoolSpec:
        return specs.PoolSpec(
            site=self.site.slug,
            chip=self.chip.slug,
            model=self.model.slug,
            role=specs.Role(self.role),
            instances=self.instance_count,
            tp=self.chips_per_instance,
            pp=self.pp,
            dp=self.dp,
            ep=self.ep,
        )
