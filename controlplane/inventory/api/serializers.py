"""Inventory serializers: field validation here, cross-field and physics in the models."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.core.api import BriefRelatedField, StrictJsonTypes
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site


class RangeCheck:
    """A field's numeric range, checked here and stated in the API schema (``openapi_schema``,
    which ``core.schema.ApiAutoSchema`` adds to the field)."""

    def __init__(
        self, *, low: float, low_open: bool, high: float | None = None, message: str
    ) -> None:
        self.low, self.low_open, self.high, self.message = low, low_open, high, message
        self.openapi_schema: dict[str, Any] = {"minimum": low}
        if low_open:
            self.openapi_schema["exclusiveMinimum"] = True
        if high is not None:
            self.openapi_schema["maximum"] = high

    def __call__(self, value: float | None) -> float | None:
        if value is None:
            return value
        below = value <= self.low if self.low_open else value < self.low
        if below or (self.high is not None and value > self.high):
            raise serializers.ValidationError(self.message)
        return value


_positive = RangeCheck(low=0, low_open=True, message="Must be greater than zero.")
_non_negative = RangeCheck(low=0, low_open=False, message="Must not be negative.")
_fraction = RangeCheck(low=0, low_open=True, high=1, message="Must be in (0, 1].")


def _range_checks(
    *,
    positive: tuple[str, ...] = (),
    non_negative: tuple[str, ...] = (),
    fraction: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``Meta.extra_kwargs`` that give each named field its range check."""
    checks = {_positive: positive, _non_negative: non_negative, _fraction: fraction}
    return {name: {"validators": [check]} for check, names in checks.items() for name in names}


class SiteSerializer(StrictJsonTypes, serializers.ModelSerializer[Site]):
    class Meta:
        model = Site
        fields = ["id", "slug", "name", "region", "description", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]


class ChipModelSerializer(StrictJsonTypes, serializers.ModelSerializer[ChipModel]):
    class Meta:
        model = ChipModel
        fields = [
            "id", "slug", "name", "vendor", "bf16_tflops", "fp8_tflops", "hbm_gib", "hbm_tbps",
            "scaleup_gbytes_per_s", "scaleout_gbits_per_s", "scaleup_domain", "chips_per_node",
            "compute_efficiency", "memory_efficiency", "price_per_hour", "source", "notes",
            "is_estimate",
        ]  # fmt: skip
        extra_kwargs = {
            **_range_checks(
                positive=("bf16_tflops", "fp8_tflops", "hbm_gib", "hbm_tbps",
                          "scaleup_gbytes_per_s", "scaleout_gbits_per_s"),
                fraction=("compute_efficiency", "memory_efficiency"),
            ),
            # PositiveIntegerFields admit 0, which a chip spec refuses: a minimum of 1, which
            # the schema states (a validator alone it does not).
            "scaleup_domain": {"min_value": 1},
            "chips_per_node": {"min_value": 1},
        }  # fmt: skip


class LinkSerializer(StrictJsonTypes, serializers.ModelSerializer[Link]):
    source = BriefRelatedField(queryset=Site.objects.all())  # type: ignore[assignment]
    target = BriefRelatedField(queryset=Site.objects.all())

    class Meta:
        model = Link
        fields = [
            "id", "slug", "kind", "source", "target", "bandwidth_gbps", "rtt_ms", "jitter_ms",
            "bandwidth_jitter", "cost_per_gb",
        ]  # fmt: skip
        extra_kwargs = _range_checks(
            positive=("bandwidth_gbps",), non_negative=("rtt_ms", "jitter_ms")
        )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs.get("kind", getattr(self.instance, "kind", None))
        source = attrs.get("source", getattr(self.instance, "source", None))
        target = attrs.get("target", getattr(self.instance, "target", None))
        if kind == "wan" and source is not None and source == target:
            raise serializers.ValidationError({"target": "A WAN link joins two different sites."})
        if kind == "rdma" and source is not None and target is not None and source != target:
            raise serializers.ValidationError({"target": "An RDMA link is one site's fabric."})
        return attrs


class ModelProfileSerializer(StrictJsonTypes, serializers.ModelSerializer[ModelProfile]):
    kv_bytes_per_token = serializers.FloatField(read_only=True)

    class Meta:
        model = ModelProfile
        fields = [
            "id", "slug", "name", "total_params_b", "active_params_b", "layers", "hidden_size",
            "attention", "attention_heads", "kv_heads", "head_dim", "kv_lora_rank", "rope_dim",
            "kv_bytes_per_elem", "weight_bytes_per_param", "moe_experts", "moe_top_k",
            "moe_shared_experts", "max_context", "kv_bytes_per_token", "source", "notes",
            "is_estimate",
        ]  # fmt: skip
        extra_kwargs = _range_checks(
            positive=("total_params_b", "active_params_b", "layers", "hidden_size",
                      "attention_heads", "kv_heads", "head_dim", "kv_bytes_per_elem",
                      "weight_bytes_per_param"),
        )  # fmt: skip


class InstancePoolSerializer(StrictJsonTypes, serializers.ModelSerializer[InstancePool]):
    site = BriefRelatedField(queryset=Site.objects.all())
    chip = BriefRelatedField(queryset=ChipModel.objects.all())
    model = BriefRelatedField(queryset=ModelProfile.objects.all())
    chip_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = InstancePool
        fields = [
            "id", "slug", "site", "chip", "model", "role", "chips_per_instance", "pp", "dp",
            "ep", "instance_count", "chip_count",
        ]  # fmt: skip
        extra_kwargs = _range_checks(positive=("chips_per_instance", "pp", "dp", "ep"))
        validators: list[Any] = []  # the unique shape is checked by the model with a clear message
